// The gemm family on the CPU: spec and config text, defaults, candidates, and the static
// quality of its sm_70 code (no spills, 128-bit weight loads) for the benchmark shape set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "base/error.h"
#include "codegen/family.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/op.h"
#include "codegen/gemm/space.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/jit/compiler.h"
#include "tests/compile_checks.h"
#include "tuner/tuner.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::expect_throw;

const char* kFormats[] = {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"};

TEST(GemmSpec, CanonicalFormFillsDefaultsAndRoundTrips) {
  EXPECT_EQ(family_of("gemm:n=4096,k=4096,fmt=awq4").canonical_spec("gemm:n=4096,k=4096,fmt=awq4"),
            "gemm:n=4096,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0");
  for (const char* fmt : kFormats) {
    const std::string text = std::string("gemm:k=2048,fmt=") + fmt + ",n=1026,epi=silu_mul";
    const std::string canon = gemm::Spec::parse(text).to_string();
    EXPECT_EQ(gemm::Spec::parse(canon).to_string(), canon);
    EXPECT_EQ(gemm::Spec::parse(canon), gemm::Spec::parse(text));
  }
  gemm::Spec s = gemm::Spec::parse("gemm:n=1000,k=1024,fmt=fp8b128,group=0,out=f32,epi=bias");
  EXPECT_EQ(s.group, 0);
  EXPECT_TRUE(s.out_f32);
  EXPECT_EQ(s.epilogue, gemm::Epilogue::kBias);
  EXPECT_EQ(gemm::Spec::parse("gemm:n=10,k=128,fmt=gptq4,epi=silu_mul").out_cols(), 5);
}

TEST(GemmSpec, MalformedSpecsAreRejectedWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gemm:n=4096,k=4096", "missing field 'fmt'"},
      {"gemm:n=4096,k=4096,fmt=int3", "is not one of"},
      {"gemm:n=0,k=4096,fmt=f16", "n=0 is out of range"},
      {"gemm:n=4096,k=4100,fmt=awq4", "must be a multiple of 32"},
      {"gemm:n=4096,k=4100,fmt=f16", "must be a multiple of 8"},
      {"gemm:n=4096,k=4096,fmt=awq4,group=96", "int4 groups are 32, 64 or 128"},
      {"gemm:n=4096,k=4096,fmt=nvfp4,group=32", "nvfp4 has group=16"},
      {"gemm:n=4096,k=4096,fmt=fp8b128,group=64", "group=128 (blocks) or group=0"},
      {"gemm:n=4096,k=4096,fmt=awq4,act_order=1", "act_order=1 is for gptq4 only"},
      {"gemm:n=4095,k=4096,fmt=f16,epi=silu_mul", "needs an even n"},
      {"gemm:n=4096,k=4096,fmt=f16,epi=gelu", "is not one of"},
      {"gemm:n=4096,k=4096,fmt=f16,tile=4", "unknown field 'tile'"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text);
    expect_throw<InputError>([&] { gemm::Spec::parse(text); }, {needle});
  }
}

// norm=rms: printed only when set (every other spec keeps its text and cache keys), the gemv
// only, its default the gemv at any M, the norm's weight required at launch, and NORM written
// into every gemv's name (what `cache import --verify` checks).
TEST(GemmSpec, NormFusedIntoTheGemv) {
  const gemm::Spec s = gemm::Spec::parse("gemm:n=6144,k=4096,fmt=awq4,norm=rms");
  EXPECT_TRUE(s.norm);
  EXPECT_EQ(s.to_string(), "gemm:n=6144,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0,norm=rms");
  EXPECT_EQ(gemm::Spec::parse(s.to_string()), s);
  EXPECT_FALSE(gemm::Spec::parse("gemm:n=6144,k=4096,fmt=awq4,norm=none").norm);
  EXPECT_EQ(gemm::Spec::parse("gemm:n=6144,k=4096,fmt=awq4,norm=none").to_string(),
            "gemm:n=6144,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0");
  expect_throw<InputError>([] { gemm::Spec::parse("gemm:n=64,k=64,fmt=f16,norm=layer"); }, {"is not one of"});
  const std::string text = s.to_string();
  const Family& f = family_of(text);
  for (Arch a : {Arch{70}, Arch{90}}) {
    for (int64_t m : {1, 3, 16, 512}) {
      EXPECT_TRUE(f.default_config(text, m, a).starts_with("strategy=gemv")) << a.name() << " m=" << m;
    }
    for (const std::string& c : f.candidate_configs(text, a)) EXPECT_TRUE(c.starts_with("strategy=gemv")) << c;
  }
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=8,rows=16,warps=2,stages=1"); },
                           {"norm=rms is fused into strategy=gemv only"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=cublas"); }, {"strategy=gemv only"});
  const gemm::Config gemv = gemm::Config::parse(s, "strategy=gemv,mt=1,rows=4,warps=4");
  EXPECT_NE(gemm::emit(s, gemv, Arch{70}).kernel_expression.find(", false, true>"), std::string::npos);
  const gemm::Spec plain = gemm::Spec::parse("gemm:n=6144,k=4096,fmt=awq4");
  EXPECT_TRUE(gemm::emit(plain, gemv, Arch{70}).kernel_expression.ends_with(", false, false>"));
  gemm::Args a;
  a.m = 1;
  expect_throw<InputError>([&] { gemm::make_call(s, gemv, a); }, {"needs the norm's weight"});
  a.norm_weight = 0x1000;
  EXPECT_NO_THROW(gemm::make_call(s, gemv, a));
  // The 8B shapes' fused gemvs compile for sm_70 and sm_90 without spills at 1 and 16 tokens.
  std::vector<CompileRequest> reqs;
  for (const char* spec :
       {"gemm:n=6144,k=4096,fmt=awq4,norm=rms", "gemm:n=24576,k=4096,fmt=nvfp4,epi=silu_mul,norm=rms",
        "gemm:n=6144,k=4096,fmt=gptq4,group=128,act_order=1,norm=rms",
        "gemm:n=24576,k=4096,fmt=f16,epi=silu_mul,norm=rms", "gemm:n=4096,k=12288,fmt=fp8b128,epi=residual"}) {
    for (Arch a : {Arch{70}, Arch{90}}) {
      for (int64_t m : {1, 16})
        reqs.push_back(CompileRequest::make(family_of(spec), spec, family_of(spec).default_config(spec, m, a), a));
    }
  }
  test::expect_compile_without_spills(reqs, false);
}

TEST(GemmConfig, RulesAndDefaults) {
  const gemm::Spec s = gemm::Spec::parse("gemm:n=4096,k=4096,fmt=awq4");
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=gemv,mt=3,rows=2,warps=4"); }, {"mt must be"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=gemv,mt=16,rows=8,warps=4"); }, {"accumulators"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=mma,mt=1,rows=2,warps=4"); }, {"missing field 'bm'"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=mma,bm=128,bn=256,wm=4,wn=2"); }, {"shared memory"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=mma,bm=128,bn=128,wm=1,wn=1"); }, {"accumulators per thread"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tile"); }, {"is not one of"});
  EXPECT_EQ(family_of("gemm:n=4096,k=4096,fmt=awq4").default_config("gemm:n=4096,k=4096,fmt=awq4", 512, Arch{70}),
            "strategy=mma,atom=wmma,bm=128,bn=128,wm=2,wn=4");
  EXPECT_EQ(family_of("gemm:n=4096,k=4096,fmt=awq4").default_config("gemm:n=4096,k=4096,fmt=awq4", 512, Arch{90}),
            "strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2");
  // The atom is the config's: text without one is WMMA (older records), m16n8k16 needs sm_80+.
  EXPECT_EQ(gemm::Config::parse(s, "strategy=mma,bm=64,bn=128,wm=2,wn=2").to_string(),
            "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2");
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2,bk=64"); }, {"bk"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(s, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=48,stages=4"); }, {"bk must be"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(s, "strategy=mma,atom=m16n8k16,bm=256,bn=128,wm=4,wn=2,bk=64,stages=4"); }, {"shared memory"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(s, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=1,wn=1,bk=32,stages=4"); }, {"accumulators"});
  expect_throw<InputError>(
      [&] {
        family_of("gemm:n=4096,k=4096,fmt=awq4")
            .emit("gemm:n=4096,k=4096,fmt=awq4", "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4", Arch{70});
      },
      {"sm_80 or newer", "sm_70"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=gemv,mt=1,rows=2,warps=16"); }, {"more warps than K"});
  // gemv: any warp count from 1 to 16; the candidates add the non-powers of two that split K's
  // chunks evenly over the lanes (448 chunks at K = 14336 in 4-bit: 7 and 14 warps).
  const gemm::Spec wide_k = gemm::Spec::parse("gemm:n=4096,k=14336,fmt=awq4");
  EXPECT_EQ(gemm::Config::parse(wide_k, "strategy=gemv,mt=1,rows=4,warps=7").to_string(), "strategy=gemv,mt=1,rows=4,warps=7");
  expect_throw<InputError>([&] { gemm::Config::parse(wide_k, "strategy=gemv,mt=1,rows=4,warps=17"); }, {"out of range"});
  std::set<int> gemv_warps;
  for (const auto& c : family_of("gemm:n=4096,k=14336,fmt=awq4").candidate_configs("gemm:n=4096,k=14336,fmt=awq4", Arch{90})) {
    if (c.starts_with("strategy=gemv")) gemv_warps.insert(gemm::Config::parse(wide_k, c).warps);
  }
  EXPECT_EQ(gemv_warps, (std::set<int>{1, 2, 4, 7, 8, 14, 16}));
  // One-token defaults: 4 rows (8 for the E2M1 formats), warps for about two chunks per lane
  // with an even split where one exists (chosen from the 8B shapes' sweeps: docs/gemm.md).
  const std::pair<const char*, const char*> one_token[] = {
      {"gemm:n=28672,k=4096,fmt=awq4", "strategy=gemv,mt=1,rows=4,warps=2"},
      {"gemm:n=4096,k=14336,fmt=awq4", "strategy=gemv,mt=1,rows=4,warps=7"},
      {"gemm:n=4096,k=14336,fmt=fp8b128", "strategy=gemv,mt=1,rows=4,warps=4"},
      {"gemm:n=28672,k=4096,fmt=mxfp4", "strategy=gemv,mt=1,rows=8,warps=2"},
      {"gemm:n=4096,k=14336,fmt=nvfp4", "strategy=gemv,mt=1,rows=8,warps=7"},
      {"gemm:n=2560,k=9728,fmt=awq4", "strategy=gemv,mt=1,rows=4,warps=4"},  // 304 chunks: no even split
  };
  for (auto [spec, want] : one_token) EXPECT_EQ(family_of(spec).default_config(spec, 1, Arch{70}), want) << spec;
  // pipe=2: unpadded swizzled tiles, so 128×256
  // with bk=32 and four stages fills the 96 KiB exactly with fp16 weights; decoded formats
  // decode one step ahead (≥ 3 stages). pipe=1 keeps its padded rows and 2–4 stages.
  const gemm::Spec f16 = gemm::Spec::parse("gemm:n=4096,k=4096,fmt=f16");
  const std::string wide = "strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=4,pipe=2";
  EXPECT_EQ(gemm::Config::parse(f16, wide).to_string(), wide);
  EXPECT_EQ(gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4,pipe=1").to_string(),
            "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4");
  EXPECT_EQ(gemm::Config::parse(f16, wide).shared_bytes(f16), 96 * 1024);
  EXPECT_EQ(gemm::Config::parse(s, wide).shared_bytes(s), 32 * 1024 + 4 * 256 * 16 + 2 * 256 * 32 * 2);
  EXPECT_EQ(gemm::Config::parse(s, wide).threads(), 256);
  EXPECT_EQ(gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=4,bk=64,stages=3,pipe=2").shared_bytes(f16),
            96 * 1024);
  expect_throw<InputError>([&] { gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=4"); },
                           {"shared memory"});  // padded rows: pipe=1 does not fit
  expect_throw<InputError>(
      [&] { gemm::Config::parse(s, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=2,pipe=2"); }, {"needs stages=3"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=64,stages=3,pipe=2"); }, {"need bk=32"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=64,bn=128,wm=2,wn=2,bk=32,stages=5"); }, {"stages must be"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=64,bn=128,wm=2,wn=2,bk=32,stages=6,pipe=2"); }, {"stages must be"});
  expect_throw<InputError>(
      [&] { gemm::Config::parse(f16, "strategy=mma,atom=m16n8k16,bm=64,bn=128,wm=2,wn=2,bk=32,stages=3,pipe=3"); }, {"pipe"});
  {
    const Family& g = family_of("gemm:n=28672,k=4096,fmt=awq4");
    const std::string pipe1 = "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4";
    // From 512 tokens pipe=2 on 128×128 tiles (K steps of 32) where that still gives two CTAs
    // per target, else 128×64 (K steps of 64); from 48 to 511 tokens 128×64 (split where the
    // tiles are too few); pipe=1 only where K is not a multiple of 64.
    const std::string tile128 = "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4,pipe=2";
    const std::string tile64 = "strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2";
    for (const char* fmt : kFormats) {
      const std::string big = std::string("gemm:n=28672,k=4096,fmt=") + fmt;
      EXPECT_EQ(g.default_config(big, 512, Arch{90}), tile128) << fmt;
      EXPECT_EQ(g.default_config(big, 2048, Arch{80}), tile128) << fmt;
      EXPECT_EQ(g.default_config(big, 128, Arch{90}), tile64) << fmt;
    }
    EXPECT_EQ(g.default_config("gemm:n=28672,k=4128,fmt=f16", 128, Arch{90}), pipe1);
    // 17–32 tokens: 8-bit weights on tc_small's 32-row tile, warps for about 2048 on the GPU
    // (the cp.async ring where a CTA has two); 4-bit weights on the 32×128 pipe=2 tile split to
    // 256 CTAs (the qwen3-8b layers' best configs at 32 tokens in the H200 tunes).
    const std::string gate_up = "gemm:n=24576,k=4096,fmt=fp8b128,epi=silu_mul";
    EXPECT_EQ(g.default_config(gate_up, 32, Arch{90}), "strategy=tc_small,mt=16,rows=32,warps=2,stages=3");
    EXPECT_EQ(g.default_config("gemm:n=4096,k=4096,fmt=fp8b128", 32, Arch{90}),
              "strategy=tc_small,mt=16,rows=32,warps=8,stages=1");
    EXPECT_EQ(g.default_config("gemm:n=6144,k=4096,fmt=fp8b32", 17, Arch{80}),
              "strategy=tc_small,mt=16,rows=32,warps=4,stages=1");
    EXPECT_EQ(g.default_config("gemm:n=24576,k=4096,fmt=nvfp4,epi=silu_mul", 32, Arch{90}),
              "strategy=mma,atom=m16n8k16,bm=32,bn=128,wm=1,wn=4,bk=64,stages=4,pipe=2,split=2");
    // 33–64 tokens of packed weights, K ≤ 8192: 64×64 tiles split to at least 384 CTAs (64
    // tiles split 8, 96 split 4, 272 split 2, 384 gated ones and 544 unsplit); K = 12288 and f16
    // keep the 64×128 tile, and from 65 tokens the 128×64 tile serves.
    const std::string t64 = "strategy=mma,atom=m16n8k16,bm=64,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2";
    EXPECT_EQ(g.default_config("gemm:n=4096,k=4096,fmt=awq4", 64, Arch{90}), t64 + ",split=8");
    EXPECT_EQ(g.default_config("gemm:n=6144,k=4096,fmt=nvfp4", 49, Arch{80}), t64 + ",split=4");
    EXPECT_EQ(g.default_config("gemm:n=6144,k=4096,fmt=awq4", 33, Arch{90}), t64 + ",split=4");
    EXPECT_EQ(g.default_config("gemm:n=17408,k=5120,fmt=gptq4", 40, Arch{90}), t64 + ",split=2");
    EXPECT_EQ(g.default_config(gate_up, 33, Arch{90}), t64);
    EXPECT_EQ(g.default_config(gate_up, 64, Arch{90}), t64);
    EXPECT_EQ(g.default_config("gemm:n=34816,k=5120,fmt=mxfp4", 64, Arch{90}), t64);
    for (const char* spec : {"gemm:n=4096,k=12288,fmt=awq4", "gemm:n=4096,k=4096,fmt=f16"}) {
      for (int m : {33, 64}) {
        EXPECT_TRUE(g.default_config(spec, m, Arch{90}).starts_with("strategy=mma,atom=m16n8k16,bm=64,bn=128,"))
            << spec << " at " << m;
      }
    }
    EXPECT_TRUE(g.default_config("gemm:n=6144,k=4096,fmt=awq4", 65, Arch{90})
                    .starts_with("strategy=mma,atom=m16n8k16,bm=128,bn=64,"));
    EXPECT_EQ(g.default_config("gemm:n=57344,k=4096,fmt=f16,epi=silu_mul", 512, Arch{90}), tile128);
    for (const char* fmt : {"awq4", "nvfp4", "f16"}) {
      const std::string narrow = std::string("gemm:n=4096,k=4096,fmt=") + fmt;
      EXPECT_EQ(g.default_config(narrow, 512, Arch{90}), tile64) << fmt;
      EXPECT_EQ(g.default_config(narrow, 256, Arch{90}), tile64 + ",split=2") << fmt;
    }
    for (const char* fmt : kFormats) {
      const std::string spec = std::string("gemm:n=28672,k=4096,fmt=") + fmt;
      const auto candidates = family_of(spec).candidate_configs(spec, Arch{90});
      for (const char* c : {"strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=4,pipe=2",
                            "strategy=mma,atom=m16n8k16,bm=256,bn=128,wm=4,wn=2,bk=32,stages=4,pipe=2",
                            "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=4,bk=64,stages=3,pipe=2",
                            "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4"}) {
        // fp8 at bk=64: 16-byte chunks of 16 values make the raw stages too big for 96 KiB.
        if (std::string(fmt).starts_with("fp8") && std::string(c).find("bk=64") != std::string::npos) continue;
        EXPECT_NE(std::find(candidates.begin(), candidates.end(), c), candidates.end()) << fmt << " " << c;
      }
    }
  }
  for (const char* fmt : kFormats) {
    for (auto [n, k] : {std::pair{6144, 4096}, std::pair{4096, 14336}, std::pair{333, 1024}, std::pair{28672, 4096}}) {
      const std::string spec = "gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt;
      const Family& f = family_of(spec);
      for (Arch arch : {Arch{70}, Arch{80}, Arch{90}}) {
        for (int64_t m : {1, 2, 3, 8, 16, 17, 512}) {
          const std::string c = f.default_config(spec, m, arch);
          EXPECT_EQ(f.canonical_config(spec, c), c) << spec << " m=" << m;
          EXPECT_EQ(f.default_config(spec, m, arch), c) << "deterministic";
          // sm_80+ above 16 tokens: mma, except 8-bit weights up to 32 tokens (tc_small).
          const bool tc_small_8bit = std::string(fmt).starts_with("fp8") && m <= 32;
          EXPECT_EQ(c.find("m16n8k16") != std::string::npos, arch.sm >= 80 && m > 16 && !tc_small_8bit)
              << spec << " m=" << m << " " << c;
          if (arch.sm >= 80 && m > 16 && m <= 32) {
            EXPECT_EQ(c.starts_with("strategy=tc_small"), tc_small_8bit) << c;
          }
        }
        const auto candidates = f.candidate_configs(spec, arch);
        EXPECT_FALSE(candidates.empty());
        EXPECT_EQ(std::set<std::string>(candidates.begin(), candidates.end()).size(), candidates.size());
        for (const auto& c : candidates) {
          EXPECT_EQ(c.find("m16n8k16") != std::string::npos, arch.sm >= 80 && c.starts_with("strategy=mma")) << c;
        }
      }
    }
  }
}

// split=S (mma: wmma, or m16n8k16 with pipe=2): S CTAs per output tile on S parts of K,
// summed through a workspace; the defaults split where the tiles are too few.
TEST(GemmConfig, SplitKRulesGeometryWorkspaceAndDefaults) {
  const gemm::Spec narrow = gemm::Spec::parse("gemm:n=4096,k=14336,fmt=awq4");
  const std::string p2 = "strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2";
  EXPECT_EQ(gemm::Config::parse(narrow, p2 + ",split=4").to_string(), p2 + ",split=4");
  EXPECT_EQ(gemm::Config::parse(narrow, p2 + ",split=1").to_string(), p2);  // split=1 keeps the old text
  EXPECT_EQ(gemm::Config::parse(narrow, "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2,split=8").to_string(),
            "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2,split=8");
  expect_throw<InputError>(
      [&] { gemm::Config::parse(narrow, "strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,split=2"); },
      {"split needs pipe=2"});
  expect_throw<InputError>([&] { gemm::Config::parse(narrow, p2 + ",split=3"); }, {"split=3", "multiple of 192"});
  expect_throw<InputError>([&] { gemm::Config::parse(narrow, p2 + ",split=17"); }, {"split"});
  expect_throw<InputError>([&] { gemm::Config::parse(narrow, "strategy=gemv,mt=1,rows=4,warps=4,split=2"); }, {"split"});
  const gemm::Spec short_k = gemm::Spec::parse("gemm:n=4096,k=1024,fmt=f16");
  expect_throw<InputError>([&] { gemm::Config::parse(short_k, "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2,split=64"); },
                           {"split=64 is out of range"});
  // Geometry: the parts along z; the workspace holds every part's tile in fp32, a counter per tile.
  const gemm::Config c4 = gemm::Config::parse(narrow, p2 + ",split=4");
  const LaunchGeometry g = gemm::geometry(narrow, c4, 130);
  EXPECT_EQ(g.grid[0], 2u);
  EXPECT_EQ(g.grid[1], 64u);
  EXPECT_EQ(g.grid[2], 4u);
  EXPECT_EQ(gemm::workspace_counters(narrow, c4, 130), 128);
  EXPECT_EQ(gemm::workspace_floats(narrow, c4, 130), 128 * 4 * 128 * 64);
  const gemm::Config c1 = gemm::Config::parse(narrow, p2);
  EXPECT_EQ(gemm::geometry(narrow, c1, 130).grid[2], 1u);
  EXPECT_EQ(gemm::workspace_floats(narrow, c1, 130), 0);
  EXPECT_EQ(gemm::workspace_counters(narrow, c1, 130), 0);
  // Defaults: 4096 outputs at 32 to 128 tokens leave 32–64 tiles (64-token tiles at 33–64
  // tokens, 128-token tiles above), split to 256 CTAs (sm_80+ on pipe=2 tiles with K steps of
  // 64, sm_70 on its WMMA tile); 28672 outputs leave enough tiles (224) and do not split. The
  // 64- and 128-token tiles split to at most 256 CTAs where that makes at least 192 (6144
  // outputs: 48 tiles of 64 tokens split 4, 96 of 128 split 2).
  const Family& f = family_of("gemm:n=4096,k=14336,fmt=awq4");
  const std::string p2_64x128 = "strategy=mma,atom=m16n8k16,bm=64,bn=128,wm=2,wn=2,bk=64,stages=4,pipe=2";
  const std::string p2_128x64 = "strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2";
  const struct {
    const char* spec;
    int64_t m;
    int sm;
    std::string config;
  } defaults[] = {
      {"gemm:n=4096,k=14336,fmt=awq4", 128, 90, p2_128x64 + ",split=4"},
      {"gemm:n=4096,k=14336,fmt=awq4", 32, 90,
       "strategy=mma,atom=m16n8k16,bm=32,bn=128,wm=1,wn=4,bk=64,stages=4,pipe=2,split=8"},
      {"gemm:n=4096,k=14336,fmt=fp8b128", 64, 80, p2_64x128 + ",split=8"},
      {"gemm:n=4096,k=14336,fmt=awq4", 33, 90, p2_64x128 + ",split=8"},
      {"gemm:n=6144,k=4096,fmt=f16", 40, 90, p2_64x128 + ",split=4"},
      // Packed weights with K ≤ 8192 at 33–64 tokens: the 64×64 tile, to at least 384 CTAs.
      {"gemm:n=6144,k=4096,fmt=nvfp4", 40, 90,
       "strategy=mma,atom=m16n8k16,bm=64,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2,split=4"},
      {"gemm:n=6144,k=4096,fmt=awq4", 128, 90, p2_128x64 + ",split=2"},
      {"gemm:n=3072,k=4096,fmt=awq4", 128, 90, p2_128x64 + ",split=4"},
      // Within 256 would leave 160 CTAs (5120 outputs: 40 tiles): fewer than 3/4 of 256, so 320.
      {"gemm:n=5120,k=17408,fmt=awq4", 64, 90, p2_64x128 + ",split=8"},
      {"gemm:n=4096,k=14336,fmt=fp8b128", 65, 80, p2_128x64 + ",split=4"},
  };
  for (const auto& d : defaults)
    EXPECT_EQ(f.default_config(d.spec, d.m, Arch{d.sm}), d.config) << d.spec << " m=" << d.m;
  EXPECT_EQ(f.default_config("gemm:n=4096,k=14336,fmt=awq4", 128, Arch{70}), "strategy=mma,atom=wmma,bm=128,bn=64,wm=2,wn=4,split=4");
  EXPECT_EQ(f.default_config("gemm:n=28672,k=4096,fmt=awq4", 128, Arch{90}).find("split"), std::string::npos);
  EXPECT_EQ(f.default_config("gemm:n=4096,k=14336,fmt=awq4", 512, Arch{90}).find("split"), std::string::npos);
  // A short K splits no further than 8 steps of bk per part.
  EXPECT_EQ(f.default_config("gemm:n=1024,k=256,fmt=f16", 64, Arch{90}).find("split"), std::string::npos);
  // Candidates with split on both atoms.
  auto has_split = [](const std::vector<std::string>& cs) {
    return std::any_of(cs.begin(), cs.end(), [](const std::string& c) { return c.find(",split=") != std::string::npos; });
  };
  EXPECT_TRUE(has_split(f.candidate_configs("gemm:n=4096,k=14336,fmt=awq4", Arch{90})));
  EXPECT_TRUE(has_split(f.candidate_configs("gemm:n=4096,k=14336,fmt=awq4", Arch{70})));
}

TEST(GemmConfig, TcSmallRulesDefaultsAndCandidates) {
  const gemm::Spec s = gemm::Spec::parse("gemm:n=4096,k=4096,fmt=awq4");
  EXPECT_EQ(gemm::Config::parse(s, "strategy=tc_small,mt=8,rows=32,warps=4,stages=3").to_string(),
            "strategy=tc_small,mt=8,rows=32,warps=4,stages=3");
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=8,rows=32,warps=16,stages=3"); }, {"bytes of shared memory"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=8,rows=32,warps=4"); }, {"missing field 'stages'"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=4,rows=32,warps=8,stages=1"); }, {"mt must be 8 or 16"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=8,rows=48,warps=8,stages=1"); }, {"rows must be 16, 32 or 64"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=16,rows=32,warps=8,stages=1"); }, {"registers of x and weights"});
  const gemm::Spec gated = gemm::Spec::parse("gemm:n=4096,k=4096,fmt=fp8b128,epi=silu_mul");
  expect_throw<InputError>([&] { gemm::Config::parse(gated, "strategy=tc_small,mt=16,rows=64,warps=4,stages=1"); }, {"accumulators"});
  // k=256 int4: 8 chunks per row are 2 k-blocks.
  expect_throw<InputError>(
      [&] { gemm::Config::parse(gemm::Spec::parse("gemm:n=64,k=256,fmt=awq4"), "strategy=tc_small,mt=8,rows=16,warps=4,stages=1"); },
      {"more warps than K has k-blocks"});
  expect_throw<InputError>(
      [&] { family_of("gemm:n=4096,k=4096,fmt=awq4").emit("gemm:n=4096,k=4096,fmt=awq4", "strategy=tc_small,mt=8,rows=16,warps=8,stages=3", Arch{70}); },
      {"sm_80 or newer", "sm_70"});
  // Launch: weight-row tiles along x (output columns: half the weight rows for silu_mul), token tiles along y.
  const LaunchGeometry g = gemm::geometry(gated, gemm::Config::parse(gated, "strategy=tc_small,mt=8,rows=32,warps=4,stages=1"), 9);
  EXPECT_EQ(g.grid[0], 2048u / 32);
  EXPECT_EQ(g.grid[1], 2u);
  EXPECT_EQ(g.grid[2], 1u);
  EXPECT_EQ(g.block[0], 128u);
  EXPECT_EQ(gemm::workspace_floats(gated, gemm::Config::parse(gated, "strategy=tc_small,mt=8,rows=32,warps=4,stages=1"), 9), 0);
  // split=S: S CTAs along z per tile; K = 4096 in int4 is 32 k-blocks, split evenly with at
  // least one per warp in each part.
  const gemm::Config split = gemm::Config::parse(s, "strategy=tc_small,mt=16,rows=64,warps=4,stages=3,split=4");
  EXPECT_EQ(split.to_string(), "strategy=tc_small,mt=16,rows=64,warps=4,stages=3,split=4");
  const LaunchGeometry gs = gemm::geometry(s, split, 20);
  EXPECT_EQ(gs.grid[0], 4096u / 64);
  EXPECT_EQ(gs.grid[1], 2u);
  EXPECT_EQ(gs.grid[2], 4u);
  // One counter per tile; per part, the 4 tiles × 2 token groups × 4 accumulators of 32 lanes.
  EXPECT_EQ(gemm::workspace_counters(s, split, 20), 64 * 2);
  EXPECT_EQ(gemm::workspace_floats(s, split, 20), 64 * 2 * 4 * (4 * 2 * 4 * 32));
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=16,rows=64,warps=4,stages=3,split=3"); },
                           {"split=3", "32 k-blocks", "divide evenly"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=16,rows=64,warps=8,stages=3,split=8"); },
                           {"more warps than K has k-blocks", "per split part"});
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=tc_small,mt=16,rows=64,warps=4,stages=3,split=32"); },
                           {"split"});
  for (const char* fmt : kFormats) {
    for (auto [n, k] : {std::pair{6144, 4096}, std::pair{4096, 14336}, std::pair{333, 1024}, std::pair{4097, 256}}) {
      const std::string spec = "gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt;
      const Family& f = family_of(spec);
      // sm_80+: tc_small from 3 to 16 tokens, gemv below; sm_70 never offers it.
      for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 16}) {
        EXPECT_EQ(f.default_config(spec, m, Arch{90}).starts_with("strategy=tc_small"), m >= 3) << spec << " m=" << m;
        EXPECT_TRUE(f.default_config(spec, m, Arch{70}).starts_with("strategy=gemv")) << spec << " m=" << m;
      }
      EXPECT_NE(f.default_config(spec, 8, Arch{90}).find("mt=8,"), std::string::npos);
      EXPECT_NE(f.default_config(spec, 16, Arch{90}).find("mt=16,"), std::string::npos);
      int tc90 = 0;
      for (const auto& c : f.candidate_configs(spec, Arch{90})) tc90 += c.starts_with("strategy=tc_small");
      EXPECT_GT(tc90, 0) << spec;
      for (const auto& c : f.candidate_configs(spec, Arch{70})) EXPECT_FALSE(c.starts_with("strategy=tc_small")) << c;
      const gemm::Spec ps = gemm::Spec::parse(spec);
      EXPECT_TRUE(gemm::fits_bucket(ps, gemm::Config::parse(ps, f.default_config(spec, 16, Arch{90})), 16));
      EXPECT_FALSE(gemm::fits_bucket(ps, gemm::Config::parse(ps, f.default_config(spec, 16, Arch{90})), 8));
      // A 16-token tile serves buckets 16 and 32 (two CTA rows), not 64.
      EXPECT_TRUE(gemm::fits_bucket(ps, gemm::Config::parse(ps, f.default_config(spec, 16, Arch{90})), 32));
      EXPECT_FALSE(gemm::fits_bucket(ps, gemm::Config::parse(ps, f.default_config(spec, 16, Arch{90})), 64));
    }
  }
}

// strategy=cublas: its text, where it is offered (every arch, last, beyond 16 tokens, never
// with act_order), its scratch and the launches of its own kernel.
TEST(GemmConfig, CublasStrategyRulesScratchAndCalls) {
  const gemm::Spec s = gemm::Spec::parse("gemm:n=4096,k=4096,fmt=awq4");
  const gemm::Config c = gemm::Config::parse(s, "strategy=cublas");
  EXPECT_EQ(c.strategy, gemm::Strategy::kCublas);
  EXPECT_EQ(c.to_string(), "strategy=cublas");
  expect_throw<InputError>([&] { gemm::Config::parse(s, "strategy=cublas,split=2"); }, {"split"});
  const std::string ordered = "gemm:n=777,k=1024,fmt=gptq4,group=128,act_order=1";
  expect_throw<InputError>([&] { gemm::Config::parse(gemm::Spec::parse(ordered), "strategy=cublas"); },
                           {"strategy=cublas", "act_order"});
  for (Arch arch : {Arch{70}, Arch{90}}) {
    for (const char* fmt : kFormats) {
      const std::string spec = std::string("gemm:n=1026,k=1024,fmt=") + fmt;
      const std::vector<std::string> cands = family_of(spec).candidate_configs(spec, arch);
      ASSERT_FALSE(cands.empty());
      EXPECT_EQ(cands.back(), "strategy=cublas") << spec << " " << arch.name();
      EXPECT_EQ(std::count(cands.begin(), cands.end(), "strategy=cublas"), 1);
      // Never a default: it needs a library the process may not have.
      for (int64_t m : {1, 16, 17, 64, 512, 4096})
        EXPECT_NE(family_of(spec).default_config(spec, m, arch), "strategy=cublas");
    }
    for (const auto& cand : family_of(ordered).candidate_configs(ordered, arch)) EXPECT_NE(cand, "strategy=cublas");
  }
  EXPECT_FALSE(gemm::fits_bucket(s, c, 16));
  EXPECT_TRUE(gemm::fits_bucket(s, c, 17));
  EXPECT_TRUE(gemm::fits_bucket(s, c, 4096));

  // Scratch: the fp16 weights (not for f16), then the fp32 product of up to 512 tokens for silu_mul.
  const gemm::Spec f16 = gemm::Spec::parse("gemm:n=4096,k=4096,fmt=f16");
  const gemm::Spec gated = gemm::Spec::parse("gemm:n=1026,k=1024,fmt=nvfp4,epi=silu_mul");
  const gemm::Spec f16_gated = gemm::Spec::parse("gemm:n=1026,k=1024,fmt=f16,epi=silu_mul");
  EXPECT_EQ(gemm::scratch_bytes(f16, c, 100), 0);
  EXPECT_EQ(gemm::scratch_bytes(s, c, 100), 4096 * 4096 * 2);
  EXPECT_EQ(gemm::cublas_product_offset(gated), (1026 * 1024 * 2 + 255) / 256 * 256);
  EXPECT_EQ(gemm::scratch_bytes(gated, c, 100),
            gemm::cublas_product_offset(gated) + (100 * 1026 * 4 + 255) / 256 * 256);
  EXPECT_EQ(gemm::scratch_bytes(gated, c, 5000), gemm::cublas_product_offset(gated) + 512 * 1026 * 4);
  EXPECT_EQ(gemm::scratch_bytes(f16_gated, c, 5000), 512 * 1026 * 4);
  EXPECT_EQ(gemm::scratch_bytes(s, gemm::default_config(s, 64, Arch{90}), 64), 0);
  EXPECT_EQ(gemm::workspace_floats(s, c, 64), 0);
  EXPECT_EQ(gemm::workspace_counters(s, c, 64), 0);

  // Not one kernel launch: make_call refuses it.
  gemm::Args a;
  a.m = 700, a.y = 0x10000, a.x = 0x20000, a.qweight = 0x30000, a.scratch = 0x400000, a.residual = 0x50000;
  expect_throw<InputError>([&] { gemm::make_call(s, c, a); }, {"strategy=cublas", "launch_op"});
  // The dequantise launch: one thread per 16-byte chunk of the whole weight.
  const KernelCall deq = gemm::make_cublas_aux_call(gated, a, gemm::CublasPhase::kDequantise, 0, 0);
  EXPECT_EQ(deq.geometry.grid[0], unsigned((1026 * 1024 / 32 + 255) / 256));
  EXPECT_EQ(deq.geometry.block[0], 256u);
  EXPECT_EQ(deq.count, 10);
  // The epilogue of tokens 512..699: y from row 512 (513 fp16 outputs a row), the product after the weights.
  const KernelCall epi = gemm::make_cublas_aux_call(gated, a, gemm::CublasPhase::kEpilogue, 512, 188);
  EXPECT_EQ(epi.geometry.grid[0], unsigned((188 * 513 + 255) / 256));
  auto arg = [](const KernelCall& k, int i) {
    uint64_t v = 0;
    std::memcpy(&v, k.values[size_t(i)].data(), 8);
    return v;
  };
  EXPECT_EQ(arg(epi, 0) & 0xffffffffu, 1u);
  EXPECT_EQ(arg(epi, 1), 0x10000u + 512u * 513u * 2u);
  EXPECT_EQ(arg(epi, 2), 0x400000u + uint64_t(gemm::cublas_product_offset(gated)));
  const gemm::Spec res = gemm::Spec::parse("gemm:n=1026,k=1024,fmt=awq4,epi=residual,out=f32");
  const KernelCall fill = gemm::make_cublas_aux_call(res, a, gemm::CublasPhase::kFill, 0, 700);
  EXPECT_EQ(arg(fill, 2), 0u);  // no product
  EXPECT_EQ(arg(fill, 8), 0x50000u);
  EXPECT_EQ(arg(fill, 9) & 0xffffffffu, 700u);
}

// From 512 tokens the tuner times mma tiles of 64 tokens or more, and gemv only up to 32 tokens
// (and every default still runs:
// tuning_candidates puts it first whatever fits_bucket says).
TEST(GemmConfig, TallBucketsTimeOnlyTallTiles) {
  for (Arch arch : {Arch{70}, Arch{90}}) {
    for (const char* fmt : kFormats) {
      const std::string spec = std::string("gemm:n=4096,k=4096,fmt=") + fmt;
      const gemm::Spec ps = gemm::Spec::parse(spec);
      int short_tiles = 0;
      for (const std::string& text : family_of(spec).candidate_configs(spec, arch)) {
        const gemm::Config c = gemm::Config::parse(ps, text);
        if (c.strategy != gemm::Strategy::kMma) continue;
        if (c.bm < 64) {
          ++short_tiles;
          EXPECT_TRUE(gemm::fits_bucket(ps, c, 256)) << text;
          EXPECT_FALSE(gemm::fits_bucket(ps, c, 512)) << text;
          EXPECT_FALSE(gemm::fits_bucket(ps, c, 2048)) << text;
        } else if (c.bm <= 128) {
          EXPECT_TRUE(gemm::fits_bucket(ps, c, 512)) << text;
        }
      }
      EXPECT_GT(short_tiles, 0) << spec;
      // gemv: its 16-token tile up to two tiles (32 tokens), none beyond.
      const gemm::Config gemv16 = gemm::Config::parse(ps, "strategy=gemv,mt=16,rows=1,warps=4");
      EXPECT_TRUE(gemm::fits_bucket(ps, gemv16, 16));
      EXPECT_TRUE(gemm::fits_bucket(ps, gemv16, 32));
      EXPECT_FALSE(gemm::fits_bucket(ps, gemv16, 64));
      EXPECT_FALSE(gemm::fits_bucket(ps, gemv16, 2048));
      for (int64_t m : {512, 2048, 4096}) {
        const std::vector<std::string> cands = tuning_candidates(family_of(spec), spec, m, arch);
        EXPECT_EQ(cands.front(), default_config_here(family_of(spec), spec, m, arch.sm));
        EXPECT_GT(cands.size(), 10u) << spec << " m=" << m;
      }
    }
  }
}

// Where strategy=cublas cannot run: a CUDA 13 cuBLAS on a Volta (CUDA 13 dropped it) says so;
// other families and strategies never need a library.
TEST(GemmConfig, CublasAvailabilityRules) {
  EXPECT_EQ(cublas_arch_gap(120800, 70), "");
  EXPECT_EQ(cublas_arch_gap(130100, 90), "");
  EXPECT_EQ(cublas_arch_gap(130100, 75), "");
  const std::string gap = cublas_arch_gap(130100, 70);
  for (const char* part : {"cuBLAS 13.1", "sm_70", "CUDA 12's cuBLAS", "libcublas.so.12"}) {
    EXPECT_NE(gap.find(part), std::string::npos) << part << " in: " << gap;
  }
  const std::string spec = "gemm:n=1026,k=1024,fmt=awq4";
  EXPECT_EQ(gemm::unavailable_reason("gemm", spec, family_of(spec).default_config(spec, 64, Arch{70}), 70), "");
  EXPECT_EQ(gemm::unavailable_reason("rmsnorm", "rmsnorm:hidden=256,dtype=f16", "strategy=cublas", 70), "");
  // Without a GPU the answer for strategy=cublas depends on this machine's cuBLAS: found or not, it is
  // the library's own reason.
  EXPECT_EQ(gemm::unavailable_reason("gemm", spec, "strategy=cublas", 90), Cublas::unusable_reason(90));
}

// Untuned, gemm runs strategy=cublas where it is the better choice (f16 beyond 16 tokens, a
// dequantising format beyond 128, never act_order) and cuBLAS can run on that GPU here; elsewhere,
// and for other families, the family's own default. The tuner times both defaults, the one that
// runs first.
TEST(GemmConfig, CublasIsTheDefaultWhereItRuns) {
  const std::string f16 = "gemm:n=1000,k=1024,fmt=f16", awq = "gemm:n=1026,k=1024,fmt=awq4";
  const std::string act = "gemm:n=1024,k=1024,fmt=gptq4,act_order=1";
  for (const std::string& spec : {f16, awq, act}) {
    const gemm::Spec ps = gemm::Spec::parse(spec);
    for (int64_t m : {1, 16, 17, 32, 128, 129, 256, 511, 512, 4096}) {
      const bool wanted = !ps.act_order && (ps.format == quant::WeightFormat::kF16 ? m > 16 : m > 128);
      EXPECT_EQ(gemm::cublas_by_default(ps, m), wanted) << spec << " m=" << m;
      for (int sm : {70, 90}) {
        const std::string own = family_of(spec).default_config(spec, m, Arch{sm});
        const std::string here = default_config_here(family_of(spec), spec, m, sm);
        EXPECT_EQ(here, wanted && Cublas::unusable_reason(sm).empty() ? "strategy=cublas" : own) << spec << " m=" << m;
        const std::vector<std::string> cands = tuning_candidates(family_of(spec), spec, m, Arch{sm});
        ASSERT_GE(cands.size(), 2u);
        EXPECT_EQ(cands[0], here);
        if (here != own) {
          EXPECT_EQ(cands[1], own);
        }
        EXPECT_EQ(std::count(cands.begin(), cands.end(), here), 1) << spec << " m=" << m;
      }
    }
  }
  const std::string norm = "rmsnorm:hidden=256,dtype=f16,residual=0";
  EXPECT_EQ(default_config_here(family_of(norm), norm, 4096, 90), family_of(norm).default_config(norm, 4096, Arch{90}));
}

// strategy=cublas's kernel for every format and epilogue compiles for sm_70 and sm_90 without
// spills; its dequantise phase reads and writes 16-byte chunks.
TEST(GemmStaticQuality, CublasKernelCompilesWithoutSpills) {
  std::vector<CompileRequest> reqs;
  for (Arch arch : {Arch{70}, Arch{90}}) {
    for (const char* fmt : kFormats) {
      for (const char* epi : {"", ",epi=bias", ",epi=residual", ",epi=silu_mul", ",out=f32"}) {
        const std::string spec = std::string("gemm:n=1026,k=1024,fmt=") + fmt + epi;
        reqs.push_back(CompileRequest::make(family_of(spec), spec, "strategy=cublas", arch));
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, true));
  const Arch sm70{70};
  const std::string spec = "gemm:n=4096,k=4096,fmt=awq4";
  const std::string ptx = compile_to_ptx(CompileRequest::make(family_of(spec), spec, "strategy=cublas", sm70),
                                         NvrtcRegistry::get().for_arch(sm70));
  EXPECT_NE(ptx.find("ld.global.nc.v4.u32"), std::string::npos);
  EXPECT_NE(ptx.find("st.global.v4.u32"), std::string::npos);
}

// ARCHITECTURE.md rule 6 / issue: the default configs of the benchmark shapes compile for
// sm_70 with zero spills, and their PTX reads weights with 128-bit loads.
// Compiles every format's default configs for the shapes and token counts on arch and
// expects each to build without spills or stack.
void expect_defaults_compile_without_spills(Arch arch, std::initializer_list<std::pair<int, int>> shapes,
                                            std::initializer_list<int64_t> ms) {
  std::vector<CompileRequest> reqs;
  for (const char* fmt : kFormats) {
    for (auto [n, k] : shapes) {
      const std::string spec = "gemm:n=" + std::to_string(n) + ",k=" + std::to_string(k) + ",fmt=" + fmt;
      const Family& f = family_of(spec);
      std::set<std::string> configs;
      for (int64_t m : ms) configs.insert(f.default_config(spec, m, arch));
      for (const auto& c : configs) reqs.push_back(CompileRequest::make(f, spec, c, arch));
    }
  }
  ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, true));
}

TEST(GemmStaticQuality, DefaultConfigsOfBenchmarkShapesDoNotSpillOnSm70) {
  const Arch sm70{70};
  const NvrtcLib& nvrtc = NvrtcRegistry::get().for_arch(sm70);
  expect_defaults_compile_without_spills(
      sm70, {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}, {1, 2, 4, 8, 16, 32, 64, 512});
  // One PTX per format and strategy: the weight chunk is one ld.global.nc.v4.u32; gemv
  // multiplies in fp16x2, mma on tensor cores (WMMA, Volta's HMMA on sm_70).
  for (const char* fmt : kFormats) {
    const std::string spec = std::string("gemm:n=4096,k=4096,fmt=") + fmt;
    const Family& f = family_of(spec);
    const std::string gemv = compile_to_ptx(CompileRequest::make(f, spec, f.default_config(spec, 1, sm70), sm70), nvrtc);
    EXPECT_NE(gemv.find("ld.global.nc.v4.u32"), std::string::npos) << fmt;
    EXPECT_NE(gemv.find("fma.rn.f16x2"), std::string::npos) << fmt;
    const std::string mma = compile_to_ptx(CompileRequest::make(f, spec, f.default_config(spec, 512, sm70), sm70), nvrtc);
    EXPECT_NE(mma.find("ld.global.nc.v4.u32"), std::string::npos) << fmt;
    EXPECT_NE(mma.find("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"), std::string::npos) << fmt;
  }
}

// The sm_80+ atom: every default mma config of the benchmark shapes compiles for sm_90
// without spills, and its PTX uses cp.async, ldmatrix and mma.sync.m16n8k16.
TEST(GemmStaticQuality, Sm90DefaultsUseTheM16n8k16AtomWithoutSpills) {
  const Arch sm90{90};
  const NvrtcLib& nvrtc = NvrtcRegistry::get().for_arch(sm90);
  expect_defaults_compile_without_spills(sm90, {{6144, 4096}, {28672, 4096}, {4096, 14336}}, {32, 64, 512});
  for (const char* fmt : {"f16", "awq4", "fp8b128"}) {
    const std::string spec = std::string("gemm:n=4096,k=4096,fmt=") + fmt;
    const Family& f = family_of(spec);
    const std::string ptx = compile_to_ptx(CompileRequest::make(f, spec, f.default_config(spec, 512, sm90), sm90), nvrtc);
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), std::string::npos) << fmt;
    EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos) << fmt;
    EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << fmt;
  }
}

// tc_small (sm_80+, M ≤ 16): its defaults for the benchmark shapes, and every candidate of two
// specs (one gated), compile for sm_90 without spills; the PTX reads weights with one 128-bit
// ld.global.nc per chunk and multiplies on mma.sync.m16n8k16 (no shared memory in the loop).
TEST(GemmStaticQuality, Sm90TcSmallCompilesWithoutSpills) {
  const Arch sm90{90};
  const NvrtcLib& nvrtc = NvrtcRegistry::get().for_arch(sm90);
  expect_defaults_compile_without_spills(sm90, {{6144, 4096}, {28672, 4096}, {4096, 14336}}, {1, 8, 16});
  std::vector<CompileRequest> reqs;
  for (const char* spec : {"gemm:n=4096,k=4096,fmt=awq4", "gemm:n=4096,k=4096,fmt=nvfp4,epi=silu_mul"}) {
    const Family& f = family_of(spec);
    for (const auto& c : f.candidate_configs(spec, sm90)) {
      if (c.starts_with("strategy=tc_small")) reqs.push_back(CompileRequest::make(f, spec, c, sm90));
    }
  }
  ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, true));
  for (const char* fmt : kFormats) {
    const std::string spec = std::string("gemm:n=4096,k=4096,fmt=") + fmt;
    const Family& f = family_of(spec);
    const std::string ptx = compile_to_ptx(CompileRequest::make(f, spec, f.default_config(spec, 16, sm90), sm90), nvrtc);
    EXPECT_NE(ptx.find("ld.global.nc.v4.u32"), std::string::npos) << fmt;  // x
    EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << fmt;  // weights, stages=3
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), std::string::npos) << fmt;
    // stages=1: the weight chunks themselves are 128-bit loads into registers.
    const std::string reg = compile_to_ptx(CompileRequest::make(f, spec, "strategy=tc_small,mt=8,rows=16,warps=8,stages=1", sm90), nvrtc);
    EXPECT_EQ(reg.find("cp.async"), std::string::npos) << fmt;
    EXPECT_NE(reg.find("ld.global.nc.v4.u32"), std::string::npos) << fmt;
  }
  struct Expected {
    const char* spec;
    int64_t m;
    const char* config;
  };
  const Expected defaults[] = {
      // N = 6144: 16-row tiles would be 384 CTAs, the wide ones 192 (int4: 96), so the wide
      // tile split along K until about 256 CTAs; N = 4096: 16-row tiles, 256 CTAs, no split.
      {"gemm:n=6144,k=4096,fmt=fp8b128", 16, "strategy=tc_small,mt=16,rows=32,warps=4,stages=3,split=2"},
      {"gemm:n=6144,k=4096,fmt=awq4", 8, "strategy=tc_small,mt=8,rows=64,warps=4,stages=3,split=4"},
      {"gemm:n=4096,k=14336,fmt=awq4", 16, "strategy=tc_small,mt=16,rows=16,warps=8,stages=3"},
      // 8-token tiles split only int4's 64-row tile; f16 never splits.
      {"gemm:n=6144,k=4096,fmt=fp8b128", 8, "strategy=tc_small,mt=8,rows=16,warps=8,stages=3"},
      {"gemm:n=6144,k=4096,fmt=f16", 16, "strategy=tc_small,mt=16,rows=16,warps=8,stages=3"},
      // Int4 on many rows: 64-row tiles of four warps; other formats 32 rows of four warps.
      {"gemm:n=28672,k=4096,fmt=awq4", 16, "strategy=tc_small,mt=16,rows=64,warps=4,stages=3"},
      {"gemm:n=28672,k=4096,fmt=mxfp4", 16, "strategy=tc_small,mt=16,rows=32,warps=4,stages=3"},
  };
  for (const Expected& e : defaults) EXPECT_EQ(family_of(e.spec).default_config(e.spec, e.m, sm90), e.config) << e.spec << " m=" << e.m;
}

// The 8-warp pipe=2 m16n8k16 tiles (128×256 with 4 or 5 stages, 256×128, 128×128 at bk=64)
// compile for sm_90 without spills or stack for every format, epilogue, act-order and an odd
// shape, and their PTX keeps cp.async, ldmatrix and mma.sync.m16n8k16.
TEST(GemmStaticQuality, Sm90EightWarpTilesCompileWithoutSpills) {
  const Arch sm90{90};
  const NvrtcLib& nvrtc = NvrtcRegistry::get().for_arch(sm90);
  const std::string wide = "strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=4,pipe=2";
  std::vector<std::pair<std::string, std::string>> jobs;
  for (const char* fmt : kFormats) jobs.emplace_back(std::string("gemm:n=28672,k=4096,fmt=") + fmt, wide);
  for (const char* fmt : {"awq4", "gptq4", "nvfp4", "mxfp4"}) {
    jobs.emplace_back(std::string("gemm:n=28672,k=4096,fmt=") + fmt, "strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=5,pipe=2");
  }
  for (const char* fmt : {"f16", "awq4", "fp8b128", "nvfp4"}) {
    jobs.emplace_back(std::string("gemm:n=28672,k=4096,fmt=") + fmt, "strategy=mma,atom=m16n8k16,bm=256,bn=128,wm=4,wn=2,bk=32,stages=4,pipe=2");
  }
  for (const char* fmt : {"f16", "awq4", "nvfp4"}) {  // fp8's raw stages do not fit 96 KiB at bk=64
    jobs.emplace_back(std::string("gemm:n=28672,k=4096,fmt=") + fmt, "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=4,bk=64,stages=3,pipe=2");
  }
  jobs.emplace_back("gemm:n=28672,k=4096,fmt=fp8b128", "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=4,bk=32,stages=4,pipe=2");
  for (const char* spec : {"gemm:n=28672,k=4096,fmt=awq4,epi=silu_mul", "gemm:n=4096,k=4096,fmt=fp8b32,epi=bias",
                           "gemm:n=4096,k=4096,fmt=mxfp4,epi=residual", "gemm:n=4096,k=4096,fmt=f16,out=f32",
                           "gemm:n=4096,k=4096,fmt=gptq4,act_order=1", "gemm:n=333,k=1024,fmt=f16"}) {
    jobs.emplace_back(spec, wide);
  }
  std::vector<CompileRequest> reqs;
  for (const auto& [spec, config] : jobs) reqs.push_back(CompileRequest::make(family_of(spec), spec, config, sm90));
  ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, true));
  for (const char* fmt : {"f16", "awq4"}) {
    const std::string spec = std::string("gemm:n=28672,k=4096,fmt=") + fmt;
    const std::string ptx = compile_to_ptx(CompileRequest::make(family_of(spec), spec, wide, sm90), nvrtc);
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), std::string::npos) << fmt;
    EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos) << fmt;
    EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << fmt;
  }
}

// CTAs an SM can hold by registers and shared memory (per-warp register allocation in units of
// 256, shared memory per SM and reserved per CTA as the CUDA occupancy calculator counts them).
int resident_ctas(Arch arch, const ResourceUsage& usage, int threads, int dynamic_shared) {
  const int warps = (threads + 31) / 32;
  const int regs_per_warp = (usage.registers * 32 + 255) / 256 * 256;
  const int by_regs = 65536 / (regs_per_warp * warps);
  const int smem_per_sm = arch.sm >= 90 ? 228 * 1024 : arch.sm >= 80 ? 164 * 1024 : 96 * 1024;
  const int reserved = arch.sm >= 80 ? 1024 : 0;
  const int by_smem = smem_per_sm / (usage.shared_bytes + dynamic_shared + reserved);
  return std::min({by_regs, by_smem, 32});
}

// Split-K's reduction (templates/gemm/split_k.cuh) runs after the main loop, and what it keeps
// in flight must not cost the tile a resident CTA: with 128 floats in flight beside a 32×128
// tile's 32 accumulators the tile went from 164 to 238 registers, three CTAs an SM to two, and
// 17-token launches of 320 and 384 CTAs 11–12 % slower (bench/RESULTS.md, "Split-K's tail").
// Every split of the small-M tiles holds as many CTAs an SM as the same tile without split.
TEST(GemmStaticQuality, SplitKKeepsTheTilesResidentCtas) {
  struct Tile {
    Arch arch;
    std::string config;  // without split
    std::vector<int> splits;
  };
  const std::vector<Tile> tiles = {
      {Arch{90}, "strategy=mma,atom=m16n8k16,bm=32,bn=128,wm=1,wn=4,bk=64,stages=4,pipe=2", {2, 4, 8, 16}},
      {Arch{90}, "strategy=mma,atom=m16n8k16,bm=64,bn=128,wm=2,wn=2,bk=64,stages=4,pipe=2", {2, 4, 8, 16}},
      {Arch{90}, "strategy=mma,atom=m16n8k16,bm=128,bn=64,wm=2,wn=2,bk=64,stages=4,pipe=2", {2, 4, 8}},
      {Arch{70}, "strategy=mma,atom=wmma,bm=32,bn=128,wm=1,wn=4", {2, 4, 8}},
      {Arch{70}, "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2", {2, 4, 8}},
  };
  struct Job {
    std::string what;  // spec [split config] arch
    Arch arch;
    int threads, base_shared, split_shared;  // the split does not change the CTA's threads
    size_t base_req, split_req;
  };
  std::vector<Job> jobs;
  std::vector<CompileRequest> reqs;
  for (const char* fmt : {"f16", "awq4", "fp8b128"}) {
    const std::string spec = std::string("gemm:n=6144,k=4096,fmt=") + fmt;
    const gemm::Spec parsed = gemm::Spec::parse(family_of(spec).canonical_spec(spec));
    for (const Tile& t : tiles) {
      const size_t base_req = reqs.size();
      reqs.push_back(CompileRequest::make(family_of(spec), spec, t.config, t.arch));
      for (int s : t.splits) {
        const std::string with = t.config + ",split=" + std::to_string(s);
        const gemm::Config base = gemm::Config::parse(parsed, t.config), split = gemm::Config::parse(parsed, with);
        jobs.push_back({spec + " [" + with + "] " + t.arch.name(), t.arch, split.threads(), base.shared_bytes(parsed),
                        split.shared_bytes(parsed), base_req, reqs.size()});
        reqs.push_back(CompileRequest::make(family_of(spec), spec, with, t.arch));
      }
    }
  }
  JitService jit(nullptr);
  const std::vector<CompileResult> results = jit.get_all(reqs, 2, Parallelism::kThreads);
  for (const Job& j : jobs) {
    const CompileResult& base = results[j.base_req];
    const CompileResult& split = results[j.split_req];
    SCOPED_TRACE(j.what);
    ASSERT_TRUE(base.error.empty() && split.error.empty()) << base.error << split.error;
    EXPECT_FALSE(split.binary.usage.spills());
    EXPECT_GE(resident_ctas(j.arch, split.binary.usage, j.threads, j.split_shared),
              resident_ctas(j.arch, base.binary.usage, j.threads, j.base_shared))
        << "registers " << base.binary.usage.registers << " -> " << split.binary.usage.registers;
  }
}

}  // namespace
}  // namespace onecat
