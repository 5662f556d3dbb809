// The attention family on the GPU against the CPU reference: every op, GQA ratios 1/4/6/8,
// head_dim 64/128/256, fp16/E4M3/E5M2 caches with per-tensor and per-head scales, pages of
// odd sizes, sliding windows, mixed lengths (1, page-aligned, odd) in one batch, empty
// sequences, split and warp-column merges, and every candidate config of two specs. Each
// group runs with the GPU's own defaults (atom=m16n8k16 on sm_80+) and again with sm_70's
// (atom=wmma), so both kernel bodies are checked on one GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/verify_attention.h"

namespace onecat {
namespace {

Arch gpu_arch() { return Arch{Driver::find()->device_info(0).sm}; }

struct AttentionGpu : ::testing::Test {
  void SetUp() override {
    char tmpl[] = "/tmp/onecat-attn-XXXXXX";
    store = std::make_unique<Store>(std::string(mkdtemp(tmpl)) + "/kernels.sqlite");
    jit = std::make_unique<JitService>(store.get());
  }
  struct Job {
    std::string spec, config;
    std::vector<int64_t> ms;
  };
  // Compiles every job at once, then checks each at each m.
  void run(const std::vector<Job>& jobs) {
    const Arch arch{Driver::find()->device_info(0).sm};
    std::vector<CompileRequest> reqs;
    for (const Job& j : jobs) reqs.push_back(CompileRequest::make(family_of(j.spec), j.spec, j.config, arch));
    auto results = jit->get_all(reqs, 16, Parallelism::kThreads);
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_TRUE(results[i].error.empty()) << jobs[i].spec << " [" << jobs[i].config << "]: " << results[i].error;
      const LoadedKernel& k = ModuleTable::get().load(results[i].binary);
      for (int64_t m : jobs[i].ms) {
        CheckResult r = check_kernel(family_of(jobs[i].spec), jobs[i].spec, jobs[i].config, k, m);
        EXPECT_TRUE(r.passed) << jobs[i].spec << " [" << jobs[i].config << "] m=" << m << " seed=" << r.seed
                              << " error=" << r.error << " (tolerance " << r.tolerance << ") " << r.detail;
      }
    }
  }
  // The defaults of `defaults_for` (the GPU's own arch unless a test asks for sm_70's WMMA).
  Job with_default(const std::string& spec, std::vector<int64_t> ms) const {
    return {spec, family_of(spec).default_config(spec, ms.back(), defaults_for), ms};
  }
  Arch defaults_for = gpu_arch();
  std::unique_ptr<Store> store;
  std::unique_ptr<JitService> jit;
};

const char* kGroups[] = {"heads=8,kv_heads=8", "heads=32,kv_heads=8", "heads=24,kv_heads=4", "heads=64,kv_heads=8"};
const char* kKv[] = {"kv=f16", "kv=e4m3,kv_scale=tensor", "kv=e5m2,kv_scale=head"};

std::vector<AttentionGpu::Job> decode_jobs(const AttentionGpu& t) {
  std::vector<AttentionGpu::Job> jobs;
  int i = 0;
  for (const char* g : kGroups) {
    for (int d : {64, 128, 256}) {
      for (const char* kv : kKv) {
        const std::string page = ++i % 3 == 0 ? "page=5" : "page=16";
        jobs.push_back(t.with_default("attention:op=decode," + std::string(g) + ",dim=" + std::to_string(d) + "," + page + "," + kv, {1, 5}));
      }
    }
  }
  return jobs;
}

TEST_F(AttentionGpu, DecodeEveryGroupDimAndKvType) { run(decode_jobs(*this)); }

TEST_F(AttentionGpu, DecodeEveryGroupDimAndKvTypeWmma) {
  defaults_for = Arch{70};
  run(decode_jobs(*this));
}

TEST_F(AttentionGpu, DecodeSplitsWarpColumnsAndWindows) {
  const std::string s = "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16";
  run({{s, "bm=64,bn=16,wn=1,split=1", {3}},
       {s, "bm=64,bn=16,wn=2,split=3", {3}},
       {s, "bm=64,bn=16,wn=2,split=7", {4}},
       {"attention:op=decode,heads=24,kv_heads=4,dim=128,page=8,kv=e4m3,window=100", "bm=64,bn=16,wn=2,split=4", {5}},
       with_default("attention:op=decode,heads=16,kv_heads=2,dim=64,page=32,kv=f16,window=33", {6})});
}

std::vector<AttentionGpu::Job> verify_jobs(const AttentionGpu& t) {
  return {t.with_default("attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=f16,q=2", {1, 5}),
          t.with_default("attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3,q=8", {1, 5}),
          t.with_default("attention:op=verify,heads=24,kv_heads=4,dim=256,page=16,kv=e5m2,kv_scale=head,q=16", {3}),
       t.with_default("attention:op=verify,heads=8,kv_heads=8,dim=64,page=5,kv=f16,q=5,window=20", {4})};
}

TEST_F(AttentionGpu, Verify) { run(verify_jobs(*this)); }

TEST_F(AttentionGpu, VerifyWmma) {
  defaults_for = Arch{70};
  run(verify_jobs(*this));
}

std::vector<AttentionGpu::Job> prefill_jobs(const AttentionGpu& t) {
  return {t.with_default("attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16", {1, 17, 300}),
          t.with_default("attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3", {33, 200}),
          t.with_default("attention:op=prefill,heads=24,kv_heads=4,dim=256,page=16,kv=f16", {1, 130}),
          t.with_default("attention:op=prefill,heads=24,kv_heads=4,dim=256,page=16,kv=e4m3,kv_scale=head", {70}),
          t.with_default("attention:op=prefill,heads=8,kv_heads=8,dim=64,page=7,kv=e5m2,kv_scale=head,window=37", {2, 250}),
          t.with_default("attention:op=prefill,heads=64,kv_heads=8,dim=128,page=16,kv=f16,causal=0", {77}),
          t.with_default("attention:op=prefill,heads=16,kv_heads=16,dim=128,page=16,kv=f16,window=64", {300})};
}

TEST_F(AttentionGpu, Prefill) { run(prefill_jobs(*this)); }

TEST_F(AttentionGpu, PrefillWmma) {
  defaults_for = Arch{70};
  run(prefill_jobs(*this));
}

// The m16n8k16 atom's knobs one at a time: stages 2–4, warp columns, split merges, narrow and
// wide key tiles, 16- and 32-row warps, windows and pages unaligned to the tiles (skipped on a GPU without it).
TEST_F(AttentionGpu, M16n8k16Knobs) {
  if (!gpu_arch().has_mma_m16n8k16()) GTEST_SKIP() << "needs sm_80+";
  const std::string d = "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16";
  const std::string p = "attention:op=prefill,heads=24,kv_heads=4,dim=128,page=7,kv=e4m3,kv_scale=head";
  const std::string p64 = "attention:op=prefill,heads=24,kv_heads=4,dim=64,page=7,kv=e4m3,kv_scale=head";
  run({{d, "atom=m16n8k16,bm=16,bn=16,wn=1,stages=2,split=1", {3}},
       {d, "atom=m16n8k16,bm=16,bn=32,wn=2,stages=2,split=7", {4}},
       {d, "atom=m16n8k16,bm=16,bn=16,wn=4,stages=2,split=5", {2}},
       {d, "atom=m16n8k16,bm=32,bn=16,wn=2,stages=4,split=3", {3}},
       {"attention:op=decode,heads=24,kv_heads=4,dim=256,page=8,kv=e5m2,window=100", "atom=m16n8k16,bm=16,bn=16,wn=2,stages=2,split=4", {5}},
       {"attention:op=verify,heads=64,kv_heads=8,dim=64,page=5,kv=f16,q=16,window=21", "atom=m16n8k16,bm=64,bn=32,wn=2,stages=3,split=2", {3}},
       // Merges of sixteen splits (sequence 2 has 4.3K keys), of two to three (up to 700 keys) and
       // single-split direct writes (a sequence of q keys); four and sixteen output chunks per thread.
       {"attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=f16,q=8", "atom=m16n8k16,bm=32,bn=16,wn=4,stages=2,split=16", {1000, 5}},
       {"attention:op=verify,heads=24,kv_heads=4,dim=256,page=16,kv=f16,q=16", "atom=m16n8k16,bm=64,bn=32,wn=1,stages=2,split=16", {700, 3}},
       {p, "atom=m16n8k16,bm=64,bn=64,wn=1,stages=2,split=1", {1, 150}},
       {p, "atom=m16n8k16,bm=128,bn=32,wn=1,stages=2,split=1", {90}},
       {p, "atom=m16n8k16,bm=64,bn=16,wn=2,stages=4,split=1", {90}},
       {"attention:op=prefill,heads=8,kv_heads=8,dim=64,page=16,kv=f16,window=40", "atom=m16n8k16,bm=128,bn=64,wn=1,stages=3,split=1", {260}},
       // Eight row warps over f16: D 256 with 16-key tiles, three stages, no mask, windows.
       {"attention:op=prefill,heads=24,kv_heads=4,dim=256,page=16,kv=f16", "atom=m16n8k16,bm=128,bn=16,wn=1,stages=2,split=1", {1, 200}},
       {"attention:op=prefill,heads=32,kv_heads=8,dim=128,page=9,kv=f16", "atom=m16n8k16,bm=128,bn=32,wn=1,stages=3,split=1", {3, 170}},
       {"attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16,causal=0", "atom=m16n8k16,bm=128,bn=64,wn=1,stages=2,split=1", {100}},
       {"attention:op=prefill,heads=16,kv_heads=2,dim=64,page=16,kv=f16,window=33", "atom=m16n8k16,bm=128,bn=64,wn=1,stages=4,split=1", {130}},
       // 32-row warps (D = 64): fp8 tiles, warp columns, split merges, windows, non-causal GQA 8.
       {p64, "atom=m16n8k16,bm=128,bn=32,wn=1,wr=32,stages=2,split=1", {1, 150}},
       {p64, "atom=m16n8k16,bm=64,bn=16,wn=2,wr=32,stages=3,split=1", {90}},
       {"attention:op=decode,heads=32,kv_heads=8,dim=64,page=16,kv=e5m2", "atom=m16n8k16,bm=32,bn=16,wn=2,wr=32,stages=4,split=3", {3}},
       {"attention:op=prefill,heads=8,kv_heads=8,dim=64,page=16,kv=f16,window=40", "atom=m16n8k16,bm=128,bn=64,wn=1,wr=32,stages=3,split=1", {260}},
       {"attention:op=prefill,heads=64,kv_heads=8,dim=64,page=16,kv=f16,causal=0", "atom=m16n8k16,bm=128,bn=32,wn=1,wr=32,stages=4,split=1", {77}}});
}

TEST_F(AttentionGpu, EmptyAndOneTokenSequences) {
  const std::string spec = "attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16";
  const Arch arch{Driver::find()->device_info(0).sm};
  for (Arch defaults : {arch, Arch{70}}) {  // both atoms
    const std::string config = family_of(spec).default_config(spec, 16, defaults);
    const LoadedKernel& k = ModuleTable::get().load(jit->get(CompileRequest::make(family_of(spec), spec, config, arch)).binary);
    // No queries and no keys; one query with a prefix; one query alone; a long one.
    AttentionCase c{{0, 40, 1, 70}, {0, 1, 1, 70}};
    CheckResult r = check_attention_case(spec, config, k, c, 12345);
    EXPECT_TRUE(r.passed) << config << ": " << r.error << " " << r.detail;
  }
}

TEST_F(AttentionGpu, KvWrite) {
  std::vector<Job> jobs;
  for (const char* kv : kKv) {
    for (const char* geo : {"kv_heads=8,dim=128,page=16", "kv_heads=4,dim=256,page=5", "kv_heads=1,dim=64,page=32"}) {
      jobs.push_back(with_default("attention:op=kv_write," + std::string(geo) + "," + kv, {1, 77}));
    }
  }
  run(jobs);
}

TEST_F(AttentionGpu, EveryCandidateConfig) {
  std::vector<Job> jobs;
  for (const char* spec : {"attention:op=prefill,heads=24,kv_heads=4,dim=128,page=16,kv=f16",
                           "attention:op=prefill,heads=8,kv_heads=2,dim=64,page=16,kv=f16",
                           "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3"}) {
    for (const std::string& config : family_of(spec).candidate_configs(spec, gpu_arch())) jobs.push_back({spec, config, {3}});
  }
  run(jobs);
}

}  // namespace
}  // namespace onecat
