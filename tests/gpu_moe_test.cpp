// The moe family on the GPU against its CPU references (tuner/verify_moe.cpp): route on tied,
// skewed and random logits bit-exact; each expert projection in every weight format on odd
// shapes, top-k 1 to 8 and 8 to 128 experts, on a routing that sends every other token to the
// same experts (large tiles next to single pairs and empty experts), with and without the slot
// table; the gemv's CTAs of several groups of rows in every format; combine; the one-launch
// decode layer in every format; the default config at 1 to 1025 tokens and every candidate at
// two counts.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "codegen/moe/config.h"
#include "codegen/moe/space.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

Arch gpu_arch() { return Arch{Driver::find()->device_info(0).sm}; }

class MoeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/onecat-gpu-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::make_unique<Store>(dir_ + "/kernels.sqlite");
    jit_ = std::make_unique<JitService>(store_.get());
  }
  void expect_passes(const std::string& spec, const std::string& config, int64_t tokens) {
    CompileResult c = jit_->get(CompileRequest::make(family_of(spec), spec, config, gpu_arch()));
    ASSERT_TRUE(c.error.empty()) << c.error;
    const CheckResult r = check_kernel(family_of(spec), spec, config, ModuleTable::get().load(c.binary), tokens);
    EXPECT_TRUE(r.passed) << spec << " [" << config << "] tokens=" << tokens << " seed=" << r.seed << " err=" << r.error
                          << " (tolerance " << r.tolerance << ") " << r.detail;
  }
  void expect_default_passes(const std::string& spec, int64_t tokens) {
    expect_passes(spec, family_of(spec).default_config(spec, tokens, gpu_arch()), tokens);
  }
  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JitService> jit_;
};

TEST_F(MoeGpu, RouteMatchesTheReference) {
  for (const char* spec : {"moe:op=route,experts=128,topk=8,norm=1", "moe:op=route,experts=128,topk=8,norm=0",
                           "moe:op=route,experts=60,topk=4,norm=0", "moe:op=route,experts=7,topk=3,norm=1",
                           "moe:op=route,experts=8,topk=1,norm=1", "moe:op=route,experts=512,topk=16,norm=1",
                           // DeepSeek-V3's router, GLM-4.5's (no groups), an odd grouped one
                           "moe:op=route,experts=256,topk=8,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4",
                           "moe:op=route,experts=160,topk=8,norm=1,score=sigmoid,bias=1",
                           "moe:op=route,experts=60,topk=3,norm=0,score=sigmoid,groups=6,topk_groups=2"}) {
    for (int64_t tokens : {1, 3, 17, 200, 1025, 4096}) expect_default_passes(spec, tokens);
  }
}

TEST_F(MoeGpu, ProjectionsInEveryFormat) {
  // (experts, topk, hidden, inter): Qwen3-30B-A3B's layer, an odd small one, top-1 of 8.
  const char* shapes[] = {"experts=128,topk=8,hidden=2048,inter=768", "experts=16,topk=3,hidden=320,inter=192",
                          "experts=8,topk=1,hidden=512,inter=64"};
  for (const char* shape : shapes) {
    for (const char* fmt : {"f16", "awq4,group=64", "gptq4,group=32", "gptq4,group=64,act_order=1", "fp8b32",
                            "fp8b128", "nvfp4", "mxfp4"}) {
      for (const char* op : {"gate_up", "down"}) {
        const std::string spec = std::string("moe:op=") + op + "," + shape + ",fmt=" + fmt;
        // 256 tokens give the 128-expert layer 16 pairs per expert (the mma default's smallest
        // tile); 1000 on the small layers reach its larger tiles (the fp64 reference of the large
        // one at 1000 tokens would take minutes).
        for (int64_t tokens : {1, 4, 33, 256, 1000}) {
          if (tokens < 1000 || shape != shapes[0]) expect_default_passes(spec, tokens);
        }
      }
    }
  }
}

TEST_F(MoeGpu, GemvRowGroupsInEveryFormat) {
  // CTAs of three groups of 8 rows: 320 down rows leave the last CTA one group short, 192
  // gate_up rows divide evenly; one pair per tile and two; and the warp in 16 groups of 2 lanes
  // (every format's rows here are an even number of chunks), a 16-row slot each; with occ.
  for (const char* fmt : {"f16", "awq4,group=64", "gptq4,group=64,act_order=1", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    for (const char* op : {"gate_up", "down"}) {
      const std::string spec = std::string("moe:op=") + op + ",experts=16,topk=3,hidden=320,inter=192,fmt=" + fmt;
      const bool down = std::string(op) == "down";
      for (const char* config :
           {"strategy=gemv,mt=1,rows=8,warps=1,loop=3", "strategy=gemv,mt=2,rows=8,warps=1,loop=3",
            down ? "strategy=gemv,mt=1,rows=16,warps=1,groups=16" : "strategy=gemv,mt=1,rows=8,warps=1,groups=16",
            down ? "strategy=gemv,mt=2,rows=16,warps=1,loop=3,groups=16"
                 : "strategy=gemv,mt=2,rows=8,warps=1,loop=3,groups=16",
            // Registers capped for 32 and 16 CTAs an SM (occ): the 4-bit down default's form.
            down ? "strategy=gemv,mt=1,rows=16,warps=1,groups=16,occ=32"
                 : "strategy=gemv,mt=1,rows=8,warps=1,groups=16,occ=32",
            "strategy=gemv,mt=2,rows=8,warps=1,loop=3,occ=16"}) {
        for (int64_t tokens : {1, 5, 33}) expect_passes(spec, config, tokens);
      }
    }
  }
}

TEST_F(MoeGpu, TcSmallInEveryFormat) {
  // sm_80+: tiles of 8 and 16 pairs on the tensor cores; 5 and 33 tokens leave tiles partly
  // full and (the check's skewed routing) experts with several tiles; 320 down rows and 192
  // gate_up rows, one 16-, 32- or 64-row tile at a time.
  if (!gpu_arch().has_mma_m16n8k16()) GTEST_SKIP() << "tc_small needs sm_80+";
  for (const char* fmt :
       {"f16", "awq4,group=64", "gptq4,group=64,act_order=1", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    for (const char* op : {"gate_up", "down"}) {
      const std::string spec = std::string("moe:op=") + op + ",experts=16,topk=3,hidden=320,inter=192,fmt=" + fmt;
      int ran = 0;
      for (const char* config :
           {"strategy=tc_small,mt=8,rows=16,warps=1,stages=1", "strategy=tc_small,mt=16,rows=32,warps=2,stages=3",
            "strategy=tc_small,mt=8,rows=64,warps=2,stages=3"}) {
        bool valid = true;
        try {
          moe::Config::parse(moe::Spec::parse(spec), config);
        } catch (const InputError&) {
          valid = false;  // more accumulators or warps than this format's shape allows
        }
        if (!valid) continue;
        ++ran;
        for (int64_t tokens : {1, 5, 33}) expect_passes(spec, config, tokens);
      }
      EXPECT_GE(ran, 2) << spec;
    }
  }
}

TEST_F(MoeGpu, CombineMatchesTheReference) {
  for (const char* spec : {"moe:op=combine,topk=8,hidden=2048", "moe:op=combine,topk=1,hidden=7",
                           "moe:op=combine,topk=3,hidden=320", "moe:op=combine,topk=4,hidden=2048,shared=gated",
                           "moe:op=combine,topk=3,hidden=200,shared=plain"}) {
    for (int64_t tokens : {1, 5, 300}) expect_default_passes(spec, tokens);
  }
}

TEST_F(MoeGpu, DecodeLayerInEveryFormat) {
  // The one-launch layer (op=decode): routing, h, y and out against the references, and its
  // counters back at 0, at 1 token and up to its largest token count; odd shapes, a sigmoid
  // router with a plain shared expert, a gated shared expert, top-1, and Qwen3-30B-A3B's layer.
  for (const char* fmt :
       {"f16", "awq4,group=64", "gptq4,group=64,act_order=1", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    const std::string spec = std::string("moe:op=decode,experts=16,topk=3,norm=1,hidden=320,inter=192,fmt=") + fmt;
    for (int64_t tokens : {1, 2, 5}) {
      expect_default_passes(spec, tokens);
      // Each pair's CTAs together in the grid.
      expect_passes(spec, family_of(spec).default_config(spec, tokens, gpu_arch()) + ",interleave=1", tokens);
    }
  }
  for (const char* spec :
       {"moe:op=decode,experts=64,topk=6,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=3,hidden=320,inter=192,"
        "shared=plain,fmt=fp8b128",
        "moe:op=decode,experts=60,topk=4,norm=0,hidden=256,inter=128,shared=gated,fmt=nvfp4",
        "moe:op=decode,experts=8,topk=1,norm=1,hidden=64,inter=40,fmt=f16"}) {
    for (int64_t tokens : {1, 3, 7}) {
      if (tokens <= moe::decode_max_tokens(moe::Spec::parse(spec))) expect_default_passes(spec, tokens);
    }
  }
  for (const char* fmt : {"awq4", "nvfp4", "fp8b128", "f16"}) {
    const std::string spec = std::string("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=") + fmt;
    for (int64_t tokens : {1, 4, 16}) expect_default_passes(spec, tokens);
  }
}

TEST_F(MoeGpu, EveryCandidateConfig) {
  for (const char* spec : {"moe:op=decode,experts=16,topk=3,norm=1,hidden=320,inter=192,fmt=awq4,group=64",
                           "moe:op=gate_up,experts=16,topk=3,hidden=320,inter=192,fmt=awq4,group=64",
                           "moe:op=down,experts=16,topk=3,hidden=320,inter=192,fmt=nvfp4",
                           "moe:op=route,experts=60,topk=4,norm=1", "moe:op=combine,topk=3,hidden=320",
                           "moe:op=route,experts=64,topk=6,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=3"}) {
    for (const std::string& config : family_of(spec).candidate_configs(spec, gpu_arch())) {
      for (int64_t tokens : {2, 65}) {
        // op=decode serves up to 5 tokens here (its grid and counters would take more).
        if (moe::Spec::parse(spec).op == moe::Op::kDecode && tokens > moe::decode_max_tokens(moe::Spec::parse(spec)))
          continue;
        expect_passes(spec, config, tokens);
      }
    }
  }
}

}  // namespace
}  // namespace onecat
