// Real NVRTC compiles of the rmsnorm family (no GPU needed), the binary key, and the
// compile service with a store.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/sha256.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "codegen/templates.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/compiler.h"
#include "runtime/jit/service.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::contains;
using test::expect_throw;
using test::TempDir;

const Family& rmsnorm_family() { return family_of("rmsnorm:hidden=1,dtype=f16,residual=0"); }

std::string spec_text(int hidden, bool residual) {
  return "rmsnorm:hidden=" + std::to_string(hidden) + ",dtype=f16,residual=" + (residual ? "1" : "0");
}

CompileRequest default_request(int hidden, bool residual, Arch arch) {
  const std::string spec = spec_text(hidden, residual);
  return CompileRequest::make(rmsnorm_family(), spec, rmsnorm_family().default_config(spec, 1, arch), arch);
}

// NvrtcRegistry::get() discovers once per process: make sure that discovery, whichever
// test triggers it, searches the usual places rather than an ONECAT_NVRTC of the caller's.
[[maybe_unused]] const bool kNvrtcEnvCleared = (unsetenv("ONECAT_NVRTC"), true);

// The library the service uses for an arch.
const NvrtcLib& nvrtc_for(Arch arch) { return NvrtcRegistry::get().for_arch(arch); }

uint16_t u16le(const std::string& s, size_t at) { return uint16_t(uint8_t(s[at]) | (uint8_t(s[at + 1]) << 8)); }
uint32_t u32le(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

// A cubin: a 64-bit ELF for EM_CUDA; with ELF ABI version 7 (CUDA 12) the low byte of
// e_flags is the SM it was built for.
void expect_cubin_for(const std::string& cubin, Arch arch) {
  ASSERT_GT(cubin.size(), 64u);
  EXPECT_EQ(cubin.compare(0, 4, "\x7f" "ELF"), 0);
  EXPECT_EQ(uint8_t(cubin[4]), 2) << "ELFCLASS64";
  EXPECT_EQ(u16le(cubin, 18), 190) << "EM_CUDA";
  if (uint8_t(cubin[8]) == 7) {
    EXPECT_EQ(int(u32le(cubin, 48) & 0xff), arch.sm) << "cubin built for another SM";
  }
}

// ---------------------------------------------------------------------------------------
// Compiles

TEST(Compile, RequestCanonicalisesAndEmits) {
  CompileRequest r = CompileRequest::make(rmsnorm_family(), "rmsnorm:residual=1,dtype=f16,hidden=4096",
                                          "vec=8,rows=1,row_threads=256", Arch{70});
  EXPECT_EQ(r.family, "rmsnorm");
  EXPECT_EQ(r.spec, "rmsnorm:hidden=4096,dtype=f16,residual=1");
  EXPECT_EQ(r.config, "row_threads=256,vec=8,rows=1");
  EXPECT_EQ(r.arch, Arch{70});
  EXPECT_TRUE(contains(r.emitted.source, "#include \"rmsnorm/rmsnorm.cuh\""));
  EXPECT_EQ(r.emitted.kernel_expression, "onecat::rmsnorm_kernel<4096, true, 256, 8, 1>");
  expect_throw<InputError>(
      [] { CompileRequest::make(rmsnorm_family(), spec_text(4095, false), "row_threads=256,vec=8,rows=1", Arch{70}); },
      {"vec=8 does not divide hidden=4095"});
}

TEST(Compile, DefaultConfigsCompileForSm70WithoutSpills) {
  const NvrtcLib& nvrtc = nvrtc_for(Arch{70});
  ASSERT_EQ(nvrtc.version(), "12.8");
  for (int hidden : {7, 1000, 4096, 5120, 8191, 16383}) {
    for (bool residual : {false, true}) {
      const CompileRequest req = default_request(hidden, residual, Arch{70});
      SCOPED_TRACE(req.spec + " [" + req.config + "]");
      KernelBinary b = compile_kernel(req, nvrtc);
      expect_cubin_for(b.cubin, Arch{70});
      EXPECT_TRUE(b.lowered_name.starts_with("_ZN6onecat14rmsnorm_kernel")) << b.lowered_name;
      EXPECT_TRUE(contains(b.lowered_name, "ILi" + std::to_string(hidden) + "ELb" + (residual ? "1" : "0")))
          << b.lowered_name;
      EXPECT_GT(b.usage.registers, 0);
      EXPECT_LE(b.usage.registers, 255);
      EXPECT_EQ(b.usage.spill_store_bytes, 0);
      EXPECT_EQ(b.usage.spill_load_bytes, 0);
      EXPECT_FALSE(b.usage.spills());
      EXPECT_EQ(b.usage.stack_bytes, 0);
      EXPECT_GE(b.usage.barriers, 0);
      // The record describes the request.
      EXPECT_EQ(b.key, binary_key(req, nvrtc.version(), nvrtc_options(req.arch)));
      EXPECT_EQ(b.family, "rmsnorm");
      EXPECT_EQ(b.spec, req.spec);
      EXPECT_EQ(b.config, req.config);
      EXPECT_EQ(b.arch, "sm_70");
      EXPECT_EQ(b.nvrtc_version, "12.8");
      EXPECT_EQ(b.options, "--gpu-architecture=sm_70 -std=c++17 --ptxas-options=-v");
      EXPECT_GT(b.compile_ms, 0);
    }
  }
}

// The largest rows: 1024-thread CTAs leave 64 registers per thread, which the config rules
// account for (rmsnorm::Config::invalid_reason).
TEST(Compile, DefaultConfigsForLargeRowsDoNotSpillOnSm70) {
  const NvrtcLib& nvrtc = nvrtc_for(Arch{70});
  for (auto [hidden, residual] : {std::pair{16383, true}, std::pair{24576, true}, std::pair{32766, true},
                                  std::pair{32768, false}, std::pair{32768, true}}) {
    const CompileRequest req = default_request(hidden, residual, Arch{70});
    SCOPED_TRACE(req.spec + " [" + req.config + "]");
    KernelBinary b = compile_kernel(req, nvrtc);
    EXPECT_FALSE(b.usage.spills()) << b.usage.spill_store_bytes << " bytes of spill stores, " << b.usage.registers
                                   << " registers";
  }
}

TEST(Compile, CompilesForSm90) {
  const NvrtcLib& nvrtc = nvrtc_for(Arch{90});
  for (auto [hidden, residual] : {std::pair{4096, true}, std::pair{8191, false}, std::pair{16384, true}}) {
    const CompileRequest req = default_request(hidden, residual, Arch{90});
    SCOPED_TRACE(req.spec + " [" + req.config + "]");
    KernelBinary b = compile_kernel(req, nvrtc);
    expect_cubin_for(b.cubin, Arch{90});
    EXPECT_TRUE(b.lowered_name.starts_with("_ZN6onecat14rmsnorm_kernel")) << b.lowered_name;
    EXPECT_GT(b.usage.registers, 0);
    EXPECT_FALSE(b.usage.spills());
    EXPECT_EQ(b.arch, "sm_90");
  }
}

TEST(Compile, Cuda13NvrtcCompilesForSm90) {
  const char* path = "/usr/local/cuda/lib64/libnvrtc.so.13";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed";
  auto nvrtc = NvrtcLib::load(path);
  const CompileRequest req = default_request(4096, true, Arch{90});
  KernelBinary b = compile_kernel(req, *nvrtc);
  EXPECT_EQ(b.cubin.compare(0, 4, "\x7f" "ELF"), 0);
  EXPECT_TRUE(b.lowered_name.starts_with("_ZN6onecat14rmsnorm_kernel"));
  EXPECT_GT(b.usage.registers, 0);
  EXPECT_EQ(b.nvrtc_version, nvrtc->version());
  // Another NVRTC version is another binary.
  EXPECT_NE(b.key, binary_key(req, "12.8", nvrtc_options(req.arch)));
}

TEST(Compile, PtxShowsTheVectorWidth) {
  const NvrtcLib& nvrtc = nvrtc_for(Arch{70});
  {
    const CompileRequest req = default_request(4096, true, Arch{70});
    ASSERT_TRUE(contains(req.config, "vec=8"));
    const std::string ptx = compile_to_ptx(req, nvrtc);
    EXPECT_TRUE(contains(ptx, ".target sm_70"));
    EXPECT_TRUE(contains(ptx, ".entry _ZN6onecat14rmsnorm_kernel"));
    EXPECT_TRUE(contains(ptx, "ld.global.nc.v4.u32")) << "x and weight: 128-bit read-only loads";
    EXPECT_TRUE(contains(ptx, "ld.global.v4.u32")) << "residual: 128-bit coherent load";
    EXPECT_TRUE(contains(ptx, "st.global.v4.u32"));
    EXPECT_EQ(ptx.find('\0'), std::string::npos);
  }
  {
    const CompileRequest req = default_request(4097, false, Arch{70});  // odd: one half per access
    ASSERT_TRUE(contains(req.config, "vec=1"));
    const std::string ptx = compile_to_ptx(req, nvrtc);
    EXPECT_TRUE(contains(ptx, "ld.global.nc.u16"));
    EXPECT_FALSE(contains(ptx, "ld.global.nc.v4.u32"));
  }
}

// runtime/jit/module_table.cpp launches every sm_90+ kernel with programmatic stream
// serialization, which is safe only if the kernel touches nothing the kernels before it write
// until griddepcontrol.wait: each template kernel calls grid_dependency_sync() before any
// global load, store, copy or atomic of its own; only L2 prefetches of weights (read-only in a
// forward pass) and, in attention launched with tables_from_host, the reads of the batch tables
// (seq_lens, cu_q, the block table: copied from the host before the pass's first kernel, written
// by no kernel) and L2 prefetches of the older keys' pages, and in rope launched with
// positions_from_host the cos/sin table built from the positions, may come first; the first
// grid_dependency_sync() in the text is the wait of every other launch.
TEST(Compile, EveryTemplateKernelWaitsForTheKernelBeforeItFirst) {
  int kernels = 0;
  for (const EmbeddedTemplate& t : embedded_templates()) {
    const std::string text(t.text);
    for (size_t at = text.find("__global__"); at != std::string::npos; at = text.find("__global__", at + 1)) {
      ++kernels;
      const size_t body = text.find(") {\n", at);
      ASSERT_NE(body, std::string::npos) << t.name << ": a __global__ signature that does not end in ') {'";
      EXPECT_TRUE(contains(text, "#include \"common/grid.cuh\"")) << t.name;
      const size_t call = text.find("  grid_dependency_sync();\n", body);
      ASSERT_NE(call, std::string::npos) << t.name << ": the kernel at offset " << at << " never waits";
      const size_t next = text.find("__global__", at + 1);
      EXPECT_TRUE(next == std::string::npos || call < next)
          << t.name << ": the kernel at offset " << at << " never waits";
      const std::string before = text.substr(body, call - body);
      for (const char* touch : {"gmem_", "cp_async", "ld.global", "st.global", "atomic", "ldg(", "__ldg", "x[", "y["}) {
        EXPECT_FALSE(contains(before, touch))
            << t.name << ": '" << touch << "' before the kernel waits (offset " << at << ")";
      }
    }
  }
  EXPECT_GE(kernels, 18) << "every family's kernels";
}

TEST(Compile, GridDependencyInstructionsOnlyFromSm90) {
  for (int sm : {70, 80, 90}) {
    const CompileRequest req = default_request(4096, true, Arch{sm});
    const std::string ptx = compile_to_ptx(req, nvrtc_for(Arch{sm}));
    SCOPED_TRACE(req.arch.name());
    EXPECT_EQ(contains(ptx, "griddepcontrol.wait;"), Arch{sm}.has_programmatic_launch());
    EXPECT_EQ(contains(ptx, "griddepcontrol.launch_dependents;"), Arch{sm}.has_programmatic_launch());
  }
}

// A request whose source includes a real template and then is not C++.
CompileRequest broken_request() {
  CompileRequest bad;
  bad.family = "rmsnorm";
  bad.spec = spec_text(4096, true);
  bad.config = "row_threads=256,vec=8,rows=1";
  bad.arch = Arch{70};
  bad.emitted.source = "#include \"rmsnorm/rmsnorm.cuh\"\nthis is not c++\n";
  bad.emitted.kernel_expression = "onecat::rmsnorm_kernel<4096, true, 256, 8, 1>";
  return bad;
}

TEST(Compile, BrokenSourceGivesNvrtcsLog) {
  const NvrtcLib& nvrtc = nvrtc_for(Arch{70});
  const CompileRequest bad = broken_request();
  std::string msg = expect_throw<Error>([&] { compile_kernel(bad, nvrtc); },
                                        {"NVRTC 12.8 could not compile", bad.spec, "sm_70", "NVRTC_ERROR_COMPILATION"});
  // NVRTC's own log follows, pointing at the line.
  EXPECT_TRUE(contains(msg, "rmsnorm.cu(2)")) << msg;
  EXPECT_TRUE(contains(msg, "error")) << msg;

  // A source that includes a template onecat does not have.
  CompileRequest missing = bad;
  missing.emitted.source = "#include \"nope/nothing.cuh\"\n";
  expect_throw<Error>([&] { compile_kernel(missing, nvrtc); }, {"\"nope/nothing.cuh\"", "not an embedded template"});
}

// ---------------------------------------------------------------------------------------
// Binary key

TEST(BinaryKey, ChangesWithEverythingThatShapesTheCubin) {
  const CompileRequest req = default_request(4096, true, Arch{70});
  const std::vector<std::string> opts = nvrtc_options(Arch{70});
  const std::string key = binary_key(req, "12.8", opts);
  EXPECT_EQ(key.size(), 64u);

  // Same inputs, built afresh: same key.
  EXPECT_EQ(binary_key(default_request(4096, true, Arch{70}), "12.8", nvrtc_options(Arch{70})), key);

  std::set<std::string> keys = {key};
  auto differs = [&](const std::string& k, const char* what) {
    EXPECT_NE(k, key) << what;
    EXPECT_TRUE(keys.insert(k).second) << what << " collides with another variation";
  };
  {  // one byte of the source
    CompileRequest r = req;
    const size_t at = r.emitted.source.find("generator");
    ASSERT_NE(at, std::string::npos);
    r.emitted.source[at] = 'G';
    ASSERT_EQ(r.emitted.source.size(), req.emitted.source.size());
    differs(binary_key(r, "12.8", opts), "source byte");
  }
  {  // the kernel expression
    CompileRequest r = req;
    r.emitted.kernel_expression = "onecat::rmsnorm_kernel<4096, true, 256, 8, 2>";
    differs(binary_key(r, "12.8", opts), "kernel expression");
  }
  {  // the option list: one more option, one fewer, and the same options in another order
    std::vector<std::string> more = opts;
    more.push_back("-lineinfo");
    differs(binary_key(req, "12.8", more), "extra option");
    std::vector<std::string> fewer(opts.begin(), opts.end() - 1);
    differs(binary_key(req, "12.8", fewer), "missing option");
    std::vector<std::string> reordered = opts;
    std::reverse(reordered.begin(), reordered.end());
    differs(binary_key(req, "12.8", reordered), "reordered options");
    // Options are hashed one by one: joining two of them is not the same list.
    std::vector<std::string> joined = {opts[0] + opts[1], opts[2]};
    differs(binary_key(req, "12.8", joined), "joined options");
  }
  differs(binary_key(req, "12.9", opts), "NVRTC version");
  differs(binary_key(req, "13.0", opts), "NVRTC major version");
  {  // the arch alone (same source text)
    CompileRequest r = req;
    r.arch = Arch{75};
    differs(binary_key(r, "12.8", opts), "arch");
  }
  // The real sm_90 request differs in options and arch.
  differs(binary_key(default_request(4096, true, Arch{90}), "12.8", nvrtc_options(Arch{90})), "sm_90 request");
  // Another config or spec.
  differs(binary_key(CompileRequest::make(rmsnorm_family(), req.spec, "row_threads=128,vec=8,rows=1", Arch{70}), "12.8", opts),
          "config");
  differs(binary_key(default_request(4096, false, Arch{70}), "12.8", opts), "spec");
}

TEST(BinaryKey, OptionsHoldNoPaths) {
  for (int sm : {70, 80, 90}) {
    for (const auto& o : nvrtc_options(Arch{sm})) EXPECT_EQ(o.find('/'), std::string::npos) << o;
  }
  EXPECT_EQ(nvrtc_options(Arch{70})[0], "--gpu-architecture=sm_70");
}

TEST(BinaryKey, CoversEveryIncludedTemplate) {
  const CompileRequest req = default_request(4096, true, Arch{70});
  // The source includes rmsnorm.cuh, which includes the common building blocks: all of
  // them are found, in a deterministic order.
  std::vector<EmbeddedTemplate> included = templates_included_by(req.emitted.source);
  std::vector<std::string> names;
  for (const auto& t : included) names.emplace_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"common/fp16.cuh", "common/gmem.cuh", "common/grid.cuh",
                                             "common/reduce.cuh", "rmsnorm/rmsnorm.cuh"}));
  for (const auto& t : included) EXPECT_FALSE(t.text.empty()) << t.name;
  EXPECT_EQ(templates_included_by("// no includes\n").size(), 0u);
  EXPECT_EQ(templates_included_by("#include \"common/fp16.cuh\"\n").size(), 1u);
  expect_throw<Error>([] { templates_included_by("#include \"common/none.cuh\"\n"); }, {"common/none.cuh"});

  // An edited template cannot be simulated in the embedded set, so rebuild the key from its
  // documented ingredients (source, kernel expression, each included template's name and
  // text, NVRTC version, options, arch; all length-prefixed) and check that it is the
  // library's key; then the same recipe with one template byte changed is another key.
  const std::vector<std::string> opts = nvrtc_options(Arch{70});
  auto recipe = [&](const std::vector<std::pair<std::string, std::string>>& templates) {
    Sha256 h;
    h.field("onecat-binary-key-v1").field(req.emitted.source).field(req.emitted.kernel_expression);
    for (const auto& [name, text] : templates) h.field(name).field(text);
    h.field("12.8");
    for (const auto& o : opts) h.field(o);
    h.field(req.arch.name());
    return to_hex(h.finish());
  };
  std::vector<std::pair<std::string, std::string>> templates;
  for (const auto& t : included) templates.emplace_back(std::string(t.name), std::string(t.text));
  ASSERT_EQ(recipe(templates), binary_key(req, "12.8", opts)) << "the key recipe changed; update this test";
  for (size_t i = 0; i < templates.size(); ++i) {
    auto edited = templates;
    edited[i].second.back() = edited[i].second.back() == ' ' ? '\t' : ' ';
    EXPECT_NE(recipe(edited), binary_key(req, "12.8", opts)) << templates[i].first;
  }
}

// ---------------------------------------------------------------------------------------
// Compile service

TEST(JitService, MissThenHitWithTheSameCubin) {
  TempDir tmp;
  Store store(tmp / "kernels.sqlite");
  JitService jit(&store);
  const CompileRequest req = default_request(2048, true, Arch{70});

  CompileResult first = jit.get(req);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(first.error.empty());
  EXPECT_GT(first.elapsed_ms, 0);
  EXPECT_EQ(first.binary.cubin.compare(0, 4, "\x7f" "ELF"), 0);
  EXPECT_EQ(store.stats().binaries, 1);

  CompileResult second = jit.get(req);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.binary.key, first.binary.key);
  EXPECT_EQ(second.binary.cubin, first.binary.cubin);
  EXPECT_EQ(second.binary.lowered_name, first.binary.lowered_name);
  EXPECT_EQ(second.binary.usage.registers, first.binary.usage.registers);
  EXPECT_EQ(second.binary.options, first.binary.options);
  EXPECT_EQ(store.stats().binaries, 1);

  // Another connection (as another process would have) hits too.
  Store again(tmp / "kernels.sqlite");
  JitService jit2(&again);
  CompileResult third = jit2.get(req);
  EXPECT_TRUE(third.cache_hit);
  EXPECT_EQ(third.binary.cubin, first.binary.cubin);

  // Without a store every request compiles.
  JitService uncached(nullptr);
  CompileResult fresh = uncached.get(req);
  EXPECT_FALSE(fresh.cache_hit);
  EXPECT_EQ(fresh.binary.key, first.binary.key);
  EXPECT_TRUE(store.verify().problems.empty());
}

std::vector<CompileRequest> four_configs() {
  const std::string spec = spec_text(4096, false);
  std::vector<CompileRequest> reqs;
  for (const char* config : {"row_threads=128,vec=8,rows=1", "row_threads=256,vec=8,rows=1", "row_threads=64,vec=8,rows=2",
                             "row_threads=512,vec=4,rows=1"}) {
    reqs.push_back(CompileRequest::make(rmsnorm_family(), spec, config, Arch{70}));
  }
  return reqs;
}

class JitServiceParallel : public ::testing::TestWithParam<Parallelism> {};

TEST_P(JitServiceParallel, GetAllCompilesEveryConfig) {
  TempDir tmp;
  Store store(tmp / "kernels.sqlite");
  JitService jit(&store);
  const std::vector<CompileRequest> reqs = four_configs();
  std::vector<int> done(reqs.size(), 0);
  std::vector<CompileResult> results = jit.get_all(reqs, 2, GetParam(), [&](size_t i) { ++done.at(i); });
  ASSERT_EQ(results.size(), reqs.size());
  std::set<std::string> keys;
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(reqs[i].config);
    EXPECT_EQ(done[i], 1) << "on_done once per request";
    EXPECT_TRUE(results[i].error.empty()) << results[i].error;
    EXPECT_EQ(results[i].binary.config, reqs[i].config) << "results are in request order";
    EXPECT_EQ(results[i].binary.key, binary_key(reqs[i], "12.8", nvrtc_options(Arch{70})));
    EXPECT_EQ(results[i].binary.cubin.compare(0, 4, "\x7f" "ELF"), 0);
    EXPECT_GT(results[i].binary.usage.registers, 0);
    keys.insert(results[i].binary.key);
    if (GetParam() == Parallelism::kThreads) {
      EXPECT_FALSE(results[i].cache_hit);
    } else {
      EXPECT_TRUE(results[i].cache_hit) << "workers compiled it into the store";
    }
  }
  EXPECT_EQ(keys.size(), reqs.size());
  EXPECT_EQ(store.stats().binaries, int64_t(reqs.size()));
  Store::Verification v = store.verify();
  EXPECT_EQ(v.checked, int64_t(reqs.size()));
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();

  // Everything is cached now: a second round compiles nothing.
  for (const auto& r : jit.get_all(reqs, 2, GetParam())) EXPECT_TRUE(r.cache_hit);
  EXPECT_EQ(store.stats().binaries, int64_t(reqs.size()));
}

INSTANTIATE_TEST_SUITE_P(Modes, JitServiceParallel, ::testing::Values(Parallelism::kThreads, Parallelism::kProcesses),
                         [](const ::testing::TestParamInfo<Parallelism>& info) {
                           return info.param == Parallelism::kThreads ? "threads" : "processes";
                         });

TEST(JitService, ErrorsCarryNvrtcsLogAndStoreNothing) {
  TempDir tmp;
  Store store(tmp / "kernels.sqlite");
  JitService jit(&store);
  const CompileRequest bad = broken_request();
  expect_throw<Error>([&] { jit.get(bad); }, {"could not compile", "rmsnorm.cu(2)", "error"});
  EXPECT_EQ(store.stats().binaries, 0);

  // In a batch the failure is reported in its slot; the others still compile.
  std::vector<CompileRequest> reqs = {default_request(1024, false, Arch{70}), bad};
  std::vector<CompileResult> results = jit.get_all(reqs, 2, Parallelism::kThreads);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].error.empty()) << results[0].error;
  EXPECT_TRUE(contains(results[1].error, "could not compile")) << results[1].error;
  EXPECT_TRUE(contains(results[1].error, "rmsnorm.cu(2)")) << results[1].error;
  EXPECT_EQ(store.stats().binaries, 1);
}

}  // namespace
}  // namespace onecat
