// The gemm family on the GPU against the CPU reference: every format, odd shapes, every
// epilogue, several token counts, the default and every candidate config.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>

#include "base/error.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "codegen/gemm/config.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/gemm_rig.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

struct GemmGpu : ::testing::Test {
  void SetUp() override {
    char tmpl[] = "/tmp/onecat-gemm-XXXXXX";
    store = std::make_unique<Store>(std::string(mkdtemp(tmpl)) + "/kernels.sqlite");
    jit = std::make_unique<JitService>(store.get());
  }
  static Arch arch() { return Arch{Driver::find()->device_info(0).sm}; }
  // The defaults on this GPU's arch and on sm_70 (WMMA, emulated on later GPUs).
  void expect_defaults_pass(const std::string& spec, int64_t m) {
    const Family& f = family_of(spec);
    expect_pass(spec, f.default_config(spec, m, arch()), m);
    if (arch().sm != 70) expect_pass(spec, f.default_config(spec, m, Arch{70}), m);
  }
  // Queues a check; TearDown compiles every queued kernel at once (NVRTC in 16 threads: one
  // at a time, compiling was most of these tests' time on the H200), then runs the checks in
  // the order queued.
  void expect_pass(const std::string& spec, const std::string& config, int64_t m) { queued.push_back({spec, config, m}); }
  void TearDown() override {
    std::vector<CompileRequest> reqs;
    std::set<std::pair<std::string, std::string>> seen;
    for (const Queued& q : queued) {
      if (seen.insert({q.spec, q.config}).second) reqs.push_back(CompileRequest::make(family_of(q.spec), q.spec, q.config, arch()));
    }
    if (!reqs.empty()) jit->get_all(reqs, 16, Parallelism::kThreads);
    for (const Queued& q : queued) check_now(q.spec, q.config, q.m);
    queued.clear();
  }
  void check_now(const std::string& spec, const std::string& config, int64_t m) {
    const Family& f = family_of(spec);
    const Arch arch = GemmGpu::arch();
    CompileResult c = jit->get(CompileRequest::make(f, spec, config, arch));
    CheckResult r = check_kernel(f, spec, config, ModuleTable::get().load(c.binary), m);
    EXPECT_TRUE(r.passed) << spec << " [" << config << "] m=" << m << " seed=" << r.seed << " error=" << r.error
                          << " (tolerance " << r.tolerance << ") " << r.detail;
  }
  struct Queued {
    std::string spec, config;
    int64_t m;
  };
  std::vector<Queued> queued;
  std::unique_ptr<Store> store;
  std::unique_ptr<JitService> jit;
};

const char* kFormats[] = {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"};

bool valid_for(const std::string& spec, const std::string& config) {
  try {
    gemm::Config::parse(gemm::Spec::parse(spec), config);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

TEST_F(GemmGpu, EveryFormatOddShapesDefaultConfigs) {
  for (const char* fmt : kFormats) {
    for (auto [n, k] : {std::pair{2560, 9728}, std::pair{333, 1024}, std::pair{4097, 256}}) {
      const std::string spec = "gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt;
      for (int64_t m : {1, 3, 7, 16, 33, 57, 130}) expect_defaults_pass(spec, m);
    }
  }
}

TEST_F(GemmGpu, GroupsAndBlocks) {
  for (const char* spec : {"gemm:n=1000,k=2048,fmt=awq4,group=64", "gemm:n=1000,k=2048,fmt=gptq4,group=32",
                           "gemm:n=1000,k=2048,fmt=fp8b128,group=0", "gemm:n=300,k=1040,fmt=fp8b128,group=128"}) {
    for (int64_t m : {1, 5, 70}) expect_defaults_pass(spec, m);
  }
}

TEST_F(GemmGpu, Epilogues) {
  for (const char* fmt : {"awq4", "fp8b128", "nvfp4"}) {
    for (const char* epi : {"epi=bias", "epi=residual", "epi=silu_mul", "out=f32"}) {
      const std::string spec = std::string("gemm:n=1026,k=1024,fmt=") + fmt + "," + epi;
      for (int64_t m : {1, 6, 40, 61}) expect_defaults_pass(spec, m);
    }
  }
}

TEST_F(GemmGpu, ActOrder) {
  const std::string spec = "gemm:n=777,k=1024,fmt=gptq4,group=128,act_order=1";
  for (int64_t m : {1, 4, 9, 50}) expect_defaults_pass(spec, m);
}

// Shapes whose default from 512 tokens on sm_80+ is a pipe=2 tile (128×64 here: N ≈ 4K): odd
// N, several token tiles with a partial last one, every format, every epilogue, act-order.
TEST_F(GemmGpu, EightWarpDefaultsOddShapes) {
  for (const char* fmt : kFormats) {
    const std::string spec = std::string("gemm:n=4097,k=1024,fmt=") + fmt;
    for (int64_t m : {1000, 1031}) expect_defaults_pass(spec, m);
  }
  for (const char* spec : {"gemm:n=8194,k=1024,fmt=awq4,epi=silu_mul", "gemm:n=8194,k=1024,fmt=f16,epi=silu_mul",
                           "gemm:n=4097,k=1024,fmt=fp8b128,epi=bias", "gemm:n=4097,k=1024,fmt=nvfp4,epi=residual",
                           "gemm:n=4097,k=1024,fmt=fp8b32,out=f32", "gemm:n=4097,k=1024,fmt=gptq4,group=128,act_order=1",
                           "gemm:n=4097,k=2048,fmt=awq4,group=64"}) {
    expect_defaults_pass(spec, 1000);
  }
}

TEST_F(GemmGpu, EveryCandidateConfig) {
  for (const char* spec : {"gemm:n=515,k=1024,fmt=awq4", "gemm:n=515,k=1024,fmt=fp8b32", "gemm:n=515,k=1024,fmt=f16",
                           "gemm:n=514,k=1024,fmt=nvfp4,epi=silu_mul"}) {
    std::set<std::string> configs;
    for (Arch a : {Arch{70}, arch()}) {
      for (const std::string& c : family_of(spec).candidate_configs(spec, a)) configs.insert(c);
    }
    // Compiled together first (in parallel), then each checked from the cache.
    std::vector<CompileRequest> reqs;
    for (const std::string& config : configs) reqs.push_back(CompileRequest::make(family_of(spec), spec, config, arch()));
    jit->get_all(reqs, 16, Parallelism::kThreads);
    for (const std::string& config : configs) {
      // tc_small: 13 tokens use both 8-token operands of mt=16, 45 several token tiles.
      if (config.starts_with("strategy=tc_small")) {
        for (int64_t m : {int64_t(config.find("mt=16") != std::string::npos ? 13 : 7), int64_t(45)}) expect_pass(spec, config, m);
      } else {
        expect_pass(spec, config, config.starts_with("strategy=mma") ? 45 : 7);
        // 8-warp m16n8k16 tiles also over several token tiles, the last one partial.
        if (config.find("m16n8k16") != std::string::npos && (config.find("wm=2,wn=4") != std::string::npos ||
                                                               config.find("wm=4,wn=2") != std::string::npos)) {
          expect_pass(spec, config, 300);
        }
      }
    }
  }
}

// split-K (split=S): both atoms that have it, every format, every epilogue, act-order, an odd
// N and several token tiles (the last partial); the same kernel launched again on the same
// workspace (its counters must be back at zero) with fresh inputs.
TEST_F(GemmGpu, SplitKEveryFormatEpilogueAndRepeatedLaunch) {
  const char* configs[] = {"strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2,split=4",
                           "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4,pipe=2,split=2",
                           "strategy=mma,atom=m16n8k16,bm=32,bn=128,wm=1,wn=4,bk=64,stages=3,pipe=2,split=8",
                           "strategy=mma,atom=m16n8k16,bm=64,bn=128,wm=2,wn=2,bk=64,stages=4,pipe=2,split=4",
                           "strategy=mma,atom=m16n8k16,bm=64,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2,split=4",
                           "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2,split=4",
                           "strategy=tc_small,mt=16,rows=32,warps=2,stages=3,split=4"};
  int checked = 0;
  auto run = [&](const std::string& spec, int64_t m) {
    for (const char* config : configs) {
      if (!valid_for(spec, config)) continue;
      expect_pass(spec, config, m);
      ++checked;
    }
  };
  for (const char* fmt : kFormats) run(std::string("gemm:n=1000,k=2048,fmt=") + fmt, 130);
  for (const char* epi : {"epi=bias", "epi=residual", "epi=silu_mul", "out=f32"}) {
    run(std::string("gemm:n=1026,k=2048,fmt=awq4,") + epi, 37);
  }
  run("gemm:n=777,k=2048,fmt=gptq4,group=128,act_order=1", 50);
  EXPECT_GE(checked, 40);
  // Repeated launches on one workspace.
  const std::string spec = "gemm:n=1000,k=2048,fmt=fp8b128";
  for (const char* config : configs) {
    const Family& f = family_of(spec);
    const LoadedKernel& k = ModuleTable::get().load(jit->get(CompileRequest::make(f, spec, config, arch())).binary);
    GemmRig rig(gemm::Spec::parse(spec), 7, 1);
    const gemm::Config c = gemm::Config::parse(gemm::Spec::parse(spec), config);
    for (int64_t m : {200, 200, 33}) {
      rig.prepare(m);
      for (int rep = 0; rep < 2; ++rep) {
        const CheckResult r = rig.check(k, c);
        EXPECT_TRUE(r.passed) << config << " m=" << m << " launch " << rep << " error=" << r.error << " " << r.detail;
      }
    }
  }
}

// gemv configs the K=1024 specs above cannot have: warp counts that are not powers of two
// (candidates where they split K's chunks evenly: 7 and 14 for 448 chunks, 3, 6 and 12 for
// 384) and a partial last iteration of the compile-time chunk loop (304 chunks over 128
// lanes), every format, silu_mul, residual, out=f32, act-order. (mxfp4 with silu_mul at this
// K overflows fp16 in the reference as in the kernel: awq4 has it.)
TEST_F(GemmGpu, GemvOddWarpsAndPartialIterations) {
  for (const char* spec : {"gemm:n=515,k=9728,fmt=awq4", "gemm:n=515,k=14336,fmt=fp8b128", "gemm:n=333,k=14336,fmt=nvfp4",
                           "gemm:n=1026,k=14336,fmt=mxfp4", "gemm:n=1026,k=12288,fmt=awq4,epi=silu_mul",
                           "gemm:n=515,k=12288,fmt=f16,epi=residual", "gemm:n=515,k=9728,fmt=gptq4,group=128,act_order=1",
                           "gemm:n=515,k=7168,fmt=fp8b32,out=f32"}) {
    const gemm::Spec ps = gemm::Spec::parse(spec);
    const int64_t chunks = ps.k / ps.per_chunk();
    std::vector<std::string> configs;
    for (const std::string& c : family_of(spec).candidate_configs(spec, arch())) {
      const gemm::Config g = gemm::Config::parse(ps, c);
      if (g.strategy != gemm::Strategy::kGemv || g.mt > 2) continue;
      const bool odd_warps = (g.warps & (g.warps - 1)) != 0, partial = chunks % (int64_t(g.warps) * 32) != 0;
      if (odd_warps || partial) configs.push_back(c);
    }
    ASSERT_FALSE(configs.empty()) << spec;
    std::vector<CompileRequest> reqs;
    for (const std::string& config : configs) reqs.push_back(CompileRequest::make(family_of(spec), spec, config, arch()));
    jit->get_all(reqs, 16, Parallelism::kThreads);
    for (const std::string& config : configs) expect_pass(spec, config, 3);
  }
}

// norm=rms (a decode step's RMSNorm fused into the gemv): every format, the epilogues the
// forward uses (none, bias, silu_mul) and residual and out=f32, odd N and K (a partial last
// iteration), act-order (the norm's weight read through the permutation), 1–16 tokens, the
// default on this arch and sm_70, and every candidate (gemv only) of one spec.
TEST_F(GemmGpu, NormFusedEveryFormatEpilogueAndCandidate) {
  for (const char* fmt : kFormats) {
    for (auto [n, k] : {std::pair{333, 1024}, std::pair{4097, 2560}}) {
      const std::string spec = "gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt + ",norm=rms";
      for (int64_t m : {1, 2, 5, 16}) expect_defaults_pass(spec, m);
    }
  }
  for (const char* epi : {"epi=bias", "epi=silu_mul", "epi=residual", "out=f32"}) {
    for (const char* fmt : {"f16", "awq4", "fp8b128", "nvfp4"}) {
      for (int64_t m : {1, 3})
        expect_defaults_pass(std::string("gemm:n=1026,k=1024,fmt=") + fmt + "," + epi + ",norm=rms", m);
    }
  }
  for (int64_t m : {1, 4}) expect_defaults_pass("gemm:n=777,k=1024,fmt=gptq4,group=128,act_order=1,norm=rms", m);
  const std::string spec = "gemm:n=514,k=1536,fmt=awq4,epi=silu_mul,norm=rms";
  const std::vector<std::string> configs = family_of(spec).candidate_configs(spec, arch());
  ASSERT_FALSE(configs.empty());
  for (const std::string& config : configs) {
    EXPECT_TRUE(config.starts_with("strategy=gemv")) << config;
    expect_pass(spec, config, config.find("mt=1,") != std::string::npos ? 1 : 3);
  }
}

// The sm_80+ small-M tensor-core strategy on its own (the defaults use it for 3..16 tokens): every format, odd N and K (a partial last k-block: 1040 fp8 values are 65 chunks),
// one and two 8-token operands, split-K across CTAs, every epilogue, groups and act-order.
TEST_F(GemmGpu, TcSmallEveryFormatEpilogueAndOddShape) {
  if (!arch().has_mma_m16n8k16()) GTEST_SKIP() << "tc_small needs sm_80+";
  const std::vector<std::string> configs = {"strategy=tc_small,mt=8,rows=16,warps=2,stages=1", "strategy=tc_small,mt=8,rows=32,warps=4,stages=3",
                                            "strategy=tc_small,mt=16,rows=16,warps=8,stages=3", "strategy=tc_small,mt=16,rows=16,warps=4,stages=4",
                                            // split-K across CTAs (the tiles of a part's k-blocks meet in the workspace)
                                            "strategy=tc_small,mt=16,rows=64,warps=2,stages=3,split=4",
                                            "strategy=tc_small,mt=8,rows=32,warps=2,stages=3,split=2",
                                            "strategy=tc_small,mt=16,rows=32,warps=1,stages=3,split=8"};
  auto check_all = [&](const std::string& spec, std::initializer_list<int64_t> ms) {
    for (const std::string& config : configs) {
      if (!valid_for(spec, config)) continue;  // e.g. more warps than K has k-blocks for
      for (int64_t m : ms) expect_pass(spec, config, m);
    }
  };
  for (const char* fmt : kFormats) {
    for (auto [n, k] : {std::pair{333, 1024}, std::pair{4097, 256}, std::pair{2560, 9728}}) {
      check_all("gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt, {1, 3, 8, 9, 16});
    }
  }
  for (const char* spec : {"gemm:n=1000,k=2048,fmt=awq4,group=64", "gemm:n=1000,k=2048,fmt=gptq4,group=32",
                           "gemm:n=1000,k=2048,fmt=fp8b128,group=0", "gemm:n=300,k=1040,fmt=fp8b128,group=128",
                           "gemm:n=777,k=1024,fmt=gptq4,group=128,act_order=1"}) {
    check_all(spec, {2, 11});
  }
  for (const char* fmt : {"f16", "awq4", "fp8b128", "nvfp4", "mxfp4"}) {
    for (const char* epi : {"epi=bias", "epi=residual", "epi=silu_mul", "out=f32"}) {
      check_all(std::string("gemm:n=1026,k=1024,fmt=") + fmt + "," + epi, {1, 6, 16});
    }
  }
}

// strategy=cublas: cuBLAS's fp16 GEMM on the weights as they are or dequantised by its own
// kernel, every format (group sizes, per-channel fp8), every epilogue, odd N, token counts
// past one 512-token product chunk of silu_mul, and the same launch repeated on one scratch.
TEST_F(GemmGpu, CublasEveryFormatEpilogueAndOddShape) {
  if (!Cublas::find()) {
    if (const char* r = std::getenv("ONECAT_REQUIRE_GPU"); r && std::string(r) == "1")
      FAIL() << Cublas::unavailable_reason();
    GTEST_SKIP() << Cublas::unavailable_reason();
  }
  const std::string config = "strategy=cublas";
  for (const char* fmt : kFormats) {
    for (auto [n, k] : {std::pair{333, 1024}, std::pair{4097, 256}}) {
      const std::string spec = "gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt;
      if (!valid_for(spec, config)) continue;
      for (int64_t m : {17, 45, 130}) expect_pass(spec, config, m);
    }
  }
  for (const char* spec : {"gemm:n=1000,k=2048,fmt=awq4,group=64", "gemm:n=1000,k=2048,fmt=gptq4,group=32",
                           "gemm:n=1000,k=2048,fmt=fp8b128,group=0", "gemm:n=300,k=1040,fmt=fp8b128,group=128"}) {
    expect_pass(spec, config, 33);
  }
  for (const char* fmt : {"f16", "awq4", "fp8b128", "nvfp4", "mxfp4"}) {
    for (const char* epi : {"epi=bias", "epi=residual", "epi=silu_mul", "out=f32", "epi=residual,out=f32"}) {
      for (int64_t m : {17, 700}) expect_pass(std::string("gemm:n=1026,k=1024,fmt=") + fmt + "," + epi, config, m);
    }
  }
  const std::string spec = "gemm:n=1026,k=1024,fmt=nvfp4,epi=silu_mul";
  const LoadedKernel& k =
      ModuleTable::get().load(jit->get(CompileRequest::make(family_of(spec), spec, config, arch())).binary);
  GemmRig rig(gemm::Spec::parse(spec), 11, 1);
  for (int64_t m : {600, 600, 40}) {
    rig.prepare(m);
    const CheckResult r = rig.check(k, gemm::Config::parse(gemm::Spec::parse(spec), config));
    EXPECT_TRUE(r.passed) << "m=" << m << " error=" << r.error << " " << r.detail;
  }
}

}  // namespace
}  // namespace onecat
