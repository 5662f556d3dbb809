// The moe family on the CPU: the routing reference (runtime/cpu/moe.h), spec and config text,
// defaults and candidates on shapes nobody tuned for, and the static quality of its code
// (NVRTC for sm_70 and sm_90: every op's defaults at 1, 16 and 512 tokens, every weight format,
// without spills).
#include "runtime/cpu/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "codegen/family.h"
#include "codegen/moe/emit.h"
#include "codegen/moe/op.h"
#include "codegen/moe/space.h"
#include "codegen/moe/spec.h"
#include "runtime/jit/compiler.h"
#include "tests/compile_checks.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

constexpr Arch kSm70{70};

using test::expect_throw;

std::vector<uint16_t> halves(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(cpu::float_to_half(f));
  return out;
}

TEST(MoeReference, TopKByLogitTiesToTheLowerIdAndSoftmaxWeights) {
  // Token 0: experts 3 and 1 lead; token 1: all tied; token 2: 0 and 2 tied behind 4.
  const std::vector<uint16_t> logits = halves({0.f, 1.f, -1.f, 2.f, 0.5f,  //
                                               0.f, 0.f, 0.f, 0.f, 0.f,    //
                                               1.f, -2.f, 1.f, -3.f, 1.5f});
  const cpu::MoeRoute r = cpu::moe_route(logits.data(), 3, 5, 2, false);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 1, 0, 1, 4, 0}));
  // Softmax over all five experts.
  double sum0 = 0;
  for (float l : {0.f, 1.f, -1.f, 2.f, 0.5f}) sum0 += std::exp(double(l) - 2.0);
  EXPECT_NEAR(r.weights[0], 1.0 / sum0, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(-1.0) / sum0, 1e-6);
  EXPECT_NEAR(r.weights[2], 0.2, 1e-6);
  // Grouped by expert in pair order: expert 0 has pairs 2 and 5, expert 1 pairs 1 and 3, ...
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 2, 4, 4, 5, 6}));
  EXPECT_EQ(r.sorted, (std::vector<int32_t>{2, 5, 1, 3, 0, 4}));
  // Renormalised: the chosen weights sum to one.
  const cpu::MoeRoute n = cpu::moe_route(logits.data(), 3, 5, 2, true);
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(n.weights[size_t(2 * t)] + n.weights[size_t(2 * t + 1)], 1.0, 1e-6);
  EXPECT_NEAR(n.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(MoeReference, GroupingIsAStablePartitionOfThePairs) {
  std::mt19937 rng(7);
  for (int experts : {1, 3, 64}) {
    std::uniform_int_distribution<int> pick(0, experts - 1);
    std::vector<int32_t> ids(301);
    for (int32_t& e : ids) e = pick(rng);
    std::vector<int32_t> offsets, sorted;
    cpu::moe_group(ids, experts, offsets, sorted);
    ASSERT_EQ(offsets.size(), size_t(experts) + 1);
    EXPECT_EQ(offsets.back(), int32_t(ids.size()));
    std::vector<int32_t> seen(sorted);
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], int32_t(i));
    for (int e = 0; e < experts; ++e) {
      for (int32_t i = offsets[size_t(e)]; i < offsets[size_t(e) + 1]; ++i) {
        EXPECT_EQ(ids[size_t(sorted[size_t(i)])], e);
        if (i > offsets[size_t(e)]) {
          EXPECT_LT(sorted[size_t(i) - 1], sorted[size_t(i)]);
        }
      }
    }
  }
}

TEST(MoeSpec, CanonicalFormAndRefusals) {
  const Family& f = family_of("moe:op=route,experts=128,topk=8,norm=1");
  EXPECT_EQ(f.name(), "moe");
  EXPECT_EQ(f.canonical_spec("moe:norm=1,topk=8,experts=128,op=route"), "moe:op=route,experts=128,topk=8,norm=1");
  EXPECT_EQ(f.canonical_spec("moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4"),
            "moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4,group=128,act_order=0");
  EXPECT_EQ(f.canonical_spec("moe:op=combine,topk=8,hidden=2048"), "moe:op=combine,topk=8,hidden=2048");
  EXPECT_EQ(f.canonical_spec("moe:op=combine,topk=8,hidden=2048,shared=none"), "moe:op=combine,topk=8,hidden=2048");
  EXPECT_EQ(f.canonical_spec("moe:op=combine,shared=gated,topk=4,hidden=2048"), "moe:op=combine,topk=4,hidden=2048,shared=gated");
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=route,experts=8,topk=2,norm=0,shared=gated"); }, {"shared"});
  EXPECT_EQ(f.canonical_spec("moe:op=route,experts=256,topk=8,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4"),
            "moe:op=route,experts=256,topk=8,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4");
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=route,experts=64,topk=2,norm=0,groups=8"); }, {"score=sigmoid"});
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=route,experts=64,topk=2,norm=0,score=sigmoid,groups=6"); },
                           {"does not divide"});
  const moe::Spec down = moe::Spec::parse("moe:op=down,experts=60,topk=4,hidden=2048,inter=1408,fmt=fp8b128");
  EXPECT_EQ(down.projection().to_string(), "gemm:n=2048,k=1408,fmt=fp8b128,group=128,out=f32,epi=none,act_order=0");
  const moe::Spec up = moe::Spec::parse("moe:op=gate_up,experts=60,topk=4,hidden=2048,inter=1408,fmt=nvfp4");
  EXPECT_EQ(up.projection().to_string(), "gemm:n=2816,k=2048,fmt=nvfp4,group=16,out=f16,epi=silu_mul,act_order=0");
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=route,experts=4,topk=8,norm=0"); }, {"topk=8 exceeds"});
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=route,experts=1024,topk=8,norm=0"); }, {"experts"});
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=mix,experts=8,topk=2"); }, {"op"});
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=combine,experts=8,topk=2,hidden=64"); }, {"experts"});
  // The projection's own rules, named as such: awq4's group must divide inter for down.
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=down,experts=8,topk=2,hidden=256,inter=96,fmt=awq4"); },
                           {"down projection", "group"});
  expect_throw<InputError>(
      [&] { f.canonical_spec("moe:op=gate_up,experts=8,topk=2,hidden=256,inter=96,fmt=awq4,act_order=1"); },
      {"act_order=1 is for gptq4"});
}

TEST(MoeConfig, DefaultsAndCandidatesHoldOnUntunedShapes) {
  const std::vector<std::string> specs = {
      "moe:op=route,experts=128,topk=8,norm=1",   "moe:op=route,experts=7,topk=3,norm=0",
      "moe:op=route,experts=512,topk=16,norm=0",  "moe:op=combine,topk=8,hidden=2048",
      "moe:op=combine,topk=1,hidden=7",
      "moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4",
      "moe:op=down,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4",
      "moe:op=gate_up,experts=60,topk=4,hidden=2048,inter=1408,fmt=fp8b128",
      "moe:op=down,experts=64,topk=6,hidden=7168,inter=2048,fmt=nvfp4",
      "moe:op=down,experts=16,topk=3,hidden=256,inter=192,fmt=gptq4,group=64,act_order=1",
      "moe:op=gate_up,experts=8,topk=2,hidden=64,inter=40,fmt=f16",
      "moe:op=down,experts=8,topk=2,hidden=64,inter=40,fmt=f16"};
  for (const std::string& text : specs) {
    const moe::Spec s = moe::Spec::parse(text);
    const Family& f = family_of(text);
    for (int64_t m : {1, 2, 16, 33, 512, 4096}) {
      for (Arch arch : {Arch{70}, Arch{90}}) {
        const auto candidates = moe::candidate_configs(s, arch);
        ASSERT_FALSE(candidates.empty()) << text;
        for (const auto& c : candidates) {
          EXPECT_FALSE(c.invalid_reason(s)) << text << " " << c.to_string();
          // tc_small runs on mma.m16n8k16: never offered to sm_70.
          if (arch.sm < 80) {
            EXPECT_FALSE(c.tc_small()) << text << " " << c.to_string();
          }
          EXPECT_EQ(f.canonical_config(text, c.to_string()), c.to_string());
        }
        const moe::Config c = moe::default_config(s, m, arch);
        EXPECT_FALSE(c.invalid_reason(s)) << text << " m=" << m;
        EXPECT_TRUE(moe::fits_bucket(s, c, m)) << text << " m=" << m << " " << c.to_string();
        EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [&](const auto& k) { return moe::fits_bucket(s, k, m); }));
        EXPECT_EQ(f.canonical_config(text, c.to_string()), c.to_string());
        const LaunchGeometry g = moe::geometry(s, c, m);
        if (s.op == moe::Op::kGateUp || s.op == moe::Op::kDown) {
          // Enough tiles for any routing: each touched expert's pairs in tiles of the config's.
          EXPECT_EQ(g.grid[1], unsigned(moe::max_tiles(s, c, m * s.topk))) << text;
          EXPECT_GE(int64_t(g.grid[1]) * c.tile_pairs(), m * s.topk) << text;
        }
      }
    }
  }
  const moe::Spec s = moe::Spec::parse("moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4");
  // Decode: a gemv tile per pair; 16 tokens give each expert one pair on average, still gemv;
  // prefill of 512 tokens gives each expert 32 pairs: tensor-core tiles of 32.
  EXPECT_EQ(moe::default_config(s, 1, kSm70).strategy, moe::Strategy::kGemv);
  EXPECT_EQ(moe::default_config(s, 1, kSm70).mt, 1);
  EXPECT_EQ(moe::default_config(s, 16, kSm70).strategy, moe::Strategy::kGemv);
  EXPECT_EQ(moe::default_config(s, 512, kSm70).strategy, moe::Strategy::kMma);
  EXPECT_EQ(moe::default_config(s, 512, kSm70).bm, 32);
  // A width the tensor-core tile cannot step through (k = 40, not a multiple of 32) stays on the gemv.
  const moe::Spec odd = moe::Spec::parse("moe:op=down,experts=8,topk=2,hidden=64,inter=40,fmt=f16");
  EXPECT_EQ(moe::default_config(odd, 4096, kSm70).strategy, moe::Strategy::kGemv);
  // 16384 tokens × top-8 in tiles of one pair would pass the grid's 65535 tiles: not timed there.
  EXPECT_FALSE(moe::fits_bucket(s, moe::Config::parse(s, "strategy=gemv,mt=1,rows=4,warps=2"), 16384));
  EXPECT_TRUE(moe::fits_bucket(s, moe::default_config(s, 16384, kSm70), 16384));
  // 4096 tokens: tiles of 64 pairs, two warps of 32 × 128 from sm_80, four of 32 × 64 on sm_70.
  EXPECT_EQ(moe::default_config(s, 4096, kSm70).to_string(), "strategy=mma,bm=64,bn=128,wm=2,wn=2");
  EXPECT_EQ(moe::default_config(s, 4096, Arch{90}).to_string(), "strategy=mma,bm=64,bn=128,wm=2,wn=1");
  // Groups of rows per CTA: printed only past one, each CTA's share of the output rows.
  const moe::Config looped = moe::Config::parse(s, "strategy=gemv,mt=1,rows=8,warps=1,loop=4");
  EXPECT_EQ(looped.to_string(), "strategy=gemv,mt=1,rows=8,warps=1,loop=4");
  EXPECT_EQ(moe::Config::parse(s, "strategy=gemv,mt=1,rows=8,warps=1,loop=1").to_string(), "strategy=gemv,mt=1,rows=8,warps=1");
  EXPECT_EQ(looped.tile_cols(), 32);
  EXPECT_EQ(moe::geometry(s, looped, 1).grid[0], 768u / 32);
  EXPECT_EQ(moe::geometry(s, looped, 1).grid[1], 8u);  // one tile per pair: 8 pairs, 8 tiles
  expect_throw<InputError>([&] { moe::Config::parse(s, "strategy=mma,bm=64,bn=128,wm=2,wn=2,loop=2"); }, {"loop"});
  const moe::Spec small = moe::Spec::parse("moe:op=down,experts=8,topk=2,hidden=64,inter=40,fmt=f16");
  expect_throw<InputError>([&] { moe::Config::parse(small, "strategy=gemv,mt=1,rows=16,warps=1,loop=8"); }, {"exceed"});
  // Lane groups: printed only past one, one warp, a power of two that divides the rows, lanes
  // that split a row's chunks evenly; the default takes them where a row's chunks leave lanes idle
  // (4-bit down of a 768-wide expert: 24 chunks) on a full grid, not at one token, and not
  // where the chunks fill the lanes (gate_up's 64, fp16 down's 96).
  const moe::Spec down = moe::Spec::parse("moe:op=down,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4");
  EXPECT_EQ(moe::Config::parse(down, "strategy=gemv,mt=1,rows=16,warps=1,groups=4").to_string(),
            "strategy=gemv,mt=1,rows=16,warps=1,groups=4");
  EXPECT_EQ(moe::Config::parse(down, "strategy=gemv,mt=1,rows=16,warps=1,groups=1").to_string(),
            "strategy=gemv,mt=1,rows=16,warps=1");
  expect_throw<InputError>([&] { moe::Config::parse(s, "strategy=gemv,mt=1,rows=4,warps=2,groups=4"); }, {"one warp"});
  expect_throw<InputError>([&] { moe::Config::parse(down, "strategy=gemv,mt=1,rows=16,warps=1,groups=3"); },
                           {"power of two"});
  expect_throw<InputError>([&] { moe::Config::parse(down, "strategy=gemv,mt=1,rows=2,warps=1,groups=4"); },
                           {"does not divide"});
  expect_throw<InputError>([&] { moe::Config::parse(small, "strategy=gemv,mt=1,rows=8,warps=1,groups=2"); },
                           {"evenly"});
  expect_throw<InputError>([&] { moe::Config::parse(down, "strategy=gemv,mt=1,rows=16,warps=1,groups=2"); },
                           {"evenly"});
  // occ: CTAs an SM the registers must allow, printed only past one, at most 1024 threads an SM;
  // the candidates repeat every gemv config of one or two warps with it (one warp: 32 and 16;
  // two: 16 and 8), never the default.
  EXPECT_EQ(moe::Config::parse(down, "strategy=gemv,mt=1,rows=16,warps=1,groups=4,occ=32").to_string(),
            "strategy=gemv,mt=1,rows=16,warps=1,groups=4,occ=32");
  EXPECT_EQ(moe::Config::parse(down, "strategy=gemv,mt=1,rows=16,warps=1,occ=1").to_string(),
            "strategy=gemv,mt=1,rows=16,warps=1");
  expect_throw<InputError>([&] { moe::Config::parse(down, "strategy=gemv,mt=1,rows=8,warps=2,occ=32"); },
                           {"occ=32", "1024 threads"});
  expect_throw<InputError>([&] { moe::Config::parse(down, "strategy=mma,bm=64,bn=128,wm=2,wn=2,occ=2"); }, {"occ"});
  {
    const auto candidates = moe::candidate_configs(down, Arch{90});
    const auto has = [&](const std::string& text) {
      return std::any_of(candidates.begin(), candidates.end(),
                         [&](const moe::Config& c) { return c.to_string() == text; });
    };
    EXPECT_TRUE(has("strategy=gemv,mt=1,rows=16,warps=1,groups=4,occ=32"));
    EXPECT_TRUE(has("strategy=gemv,mt=2,rows=8,warps=1,loop=2,occ=32"));
    EXPECT_TRUE(has("strategy=gemv,mt=1,rows=8,warps=1,occ=16"));
    EXPECT_FALSE(has("strategy=gemv,mt=1,rows=8,warps=4,occ=8"));
    for (const moe::Config& c : candidates) EXPECT_FALSE(c.occ > 1 && (c.warps > 2 || c.mt > 2)) << c.to_string();
    // occ only on the full grid of grouped one-warp CTAs (4 tokens; 16 take tc_small on sm_90),
    // not one token's small grid or prefill's tiles.
    for (int m : {1, 4, 16, 256}) EXPECT_EQ(moe::default_config(down, m, Arch{90}).occ, m == 4 ? 32 : 1) << m;
  }
  EXPECT_EQ(moe::default_config(down, 1, Arch{90}).groups, 1);
  EXPECT_EQ(moe::default_config(down, 4, Arch{90}).to_string(), "strategy=gemv,mt=1,rows=16,warps=1,groups=4,occ=32");
  EXPECT_EQ(moe::default_config(down, 16, kSm70).to_string(), "strategy=gemv,mt=1,rows=16,warps=1,groups=4,occ=32");
  EXPECT_EQ(moe::default_config(s, 16, kSm70).groups, 1);
  const moe::Spec down16 = moe::Spec::parse("moe:op=down,experts=128,topk=8,hidden=2048,inter=768,fmt=f16");
  EXPECT_EQ(moe::default_config(down16, 16, kSm70).groups, 1);
  // 44 chunks (Qwen1.5-MoE's 1408-wide experts in 4 bits) would give 4-lane groups 11 chunks a
  // lane each: not the default.
  const moe::Spec down44 = moe::Spec::parse("moe:op=down,experts=60,topk=4,hidden=2048,inter=1408,fmt=awq4");
  EXPECT_EQ(moe::default_config(down44, 64, kSm70).groups, 1);
  const moe::Spec down48 = moe::Spec::parse("moe:op=down,experts=128,topk=8,hidden=2048,inter=768,fmt=fp8b128");
  EXPECT_EQ(moe::default_config(down48, 16, kSm70).to_string(), "strategy=gemv,mt=1,rows=16,warps=1,groups=2");
  // sm_80+ from one pair per expert on average to 64: tc_small, 8-pair tiles up to 4 pairs per
  // expert, 16 from 8; gate_up 16 output rows, down 32, about six k-blocks a warp; 16-pair
  // tiles of 4-bit weights on twice the rows, one warp, the cp.async ring. Below one pair per
  // expert and on sm_70: the gemv; past 64 per expert: the mma tile.
  EXPECT_EQ(moe::default_config(s, 16, Arch{90}).to_string(), "strategy=tc_small,mt=8,rows=16,warps=2,stages=1");
  EXPECT_EQ(moe::default_config(down, 64, Arch{90}).to_string(), "strategy=tc_small,mt=8,rows=32,warps=1,stages=1");
  EXPECT_EQ(moe::default_config(down48, 256, Arch{90}).to_string(), "strategy=tc_small,mt=16,rows=32,warps=2,stages=1");
  EXPECT_EQ(moe::default_config(down16, 64, Arch{90}).to_string(), "strategy=tc_small,mt=8,rows=32,warps=4,stages=1");
  EXPECT_EQ(moe::default_config(s, 8, Arch{90}).strategy, moe::Strategy::kGemv);
  EXPECT_EQ(moe::default_config(s, 64, kSm70).strategy, moe::Strategy::kGemv);
  EXPECT_EQ(moe::default_config(down, 256, Arch{90}).to_string(), "strategy=tc_small,mt=16,rows=64,warps=1,stages=3");
  EXPECT_EQ(moe::default_config(s, 1024, Arch{90}).to_string(), "strategy=tc_small,mt=16,rows=32,warps=1,stages=3");
  EXPECT_EQ(moe::default_config(s, 2048, Arch{90}).strategy, moe::Strategy::kMma);
  expect_throw<InputError>(
      [&] { moe::emit(s, moe::Config::parse(s, "strategy=tc_small,mt=8,rows=16,warps=2,stages=1"), kSm70); },
      {"sm_80 or newer"});
  // The tile search's shared memory on top of the gemm tile's: 16 gate_up rows' 64-row weight
  // ring in two-warp CTAs passes 48 KiB.
  const moe::Spec small_up = moe::Spec::parse("moe:op=gate_up,experts=16,topk=3,hidden=320,inter=192,fmt=f16");
  expect_throw<InputError>([&] { moe::Config::parse(small_up, "strategy=tc_small,mt=8,rows=64,warps=2,stages=3"); },
                           {"tile search"});
  const moe::Config mma = moe::Config::parse(s, "strategy=mma,bm=64,bn=128,wm=2,wn=2");
  EXPECT_EQ(mma.to_string(), "strategy=mma,bm=64,bn=128,wm=2,wn=2");
  EXPECT_EQ(mma.cta_threads(), 128);
  EXPECT_EQ(mma.tile_cols(), 64);  // gate_up: 64 gate and 64 up rows give 64 outputs
  expect_throw<InputError>([&] { moe::Config::parse(s, "strategy=mma,bm=16,bn=128,wm=2,wn=2"); }, {"whole 16×16"});
  expect_throw<InputError>([&] { moe::Config::parse(s, "strategy=mma,bm=64,bn=128,wm=2,wn=2,mt=4"); }, {"mt"});
  expect_throw<InputError>([&] { moe::Config::parse(s, "threads=128"); }, {"strategy"});
  expect_throw<InputError>([&] { moe::Config::parse(s, "strategy=gemv,mt=16,rows=8,warps=1"); }, {"accumulators"});
  const moe::Spec r = moe::Spec::parse("moe:op=route,experts=128,topk=8,norm=1");
  expect_throw<InputError>([&] { moe::Config::parse(r, "threads=100,tokens=1"); }, {"whole number of warps"});
  expect_throw<InputError>([&] { moe::Config::parse(r, "threads=128"); }, {"tokens"});
  expect_throw<InputError>([&] { moe::Config::parse(r, "threads=128,tokens=3"); }, {"power of two"});
  const moe::Spec r16 = moe::Spec::parse("moe:op=route,experts=64,topk=16,norm=0");
  expect_throw<InputError>([&] { moe::Config::parse(r16, "threads=128,tokens=512"); }, {"tokens"});
  // Decode routes in one CTA without a workspace; 4096 prefill tokens over about 128 CTAs that
  // meet in one (a counter, counts per CTA and expert, a rank per pair).
  const moe::Config one = moe::default_config(r, 16, kSm70);
  EXPECT_EQ(one.route_ctas(16), 1);
  EXPECT_EQ(moe::geometry(r, one, 16).grid[0], 1u);
  EXPECT_EQ(moe::workspace_bytes(r, one, 16), 0);
  const moe::Config many = moe::default_config(r, 4096, kSm70);
  EXPECT_EQ(many.route_ctas(4096), 128);
  EXPECT_EQ(moe::geometry(r, many, 4096).grid[0], 128u);
  EXPECT_EQ(moe::workspace_bytes(r, many, 4096), 16 + 4 * (128 * 128 + 4096 * 8));
  EXPECT_EQ(moe::workspace_bytes(s, moe::default_config(s, 4096, kSm70), 4096), 0);
  // Between: a warp per token over about √m tokens a CTA.
  EXPECT_EQ(moe::default_config(r, 32, kSm70).to_string(), "threads=1024,tokens=32");
  EXPECT_EQ(moe::default_config(r, 64, kSm70).to_string(), "threads=256,tokens=8");
  EXPECT_EQ(moe::default_config(r, 256, kSm70).to_string(), "threads=512,tokens=16");
  EXPECT_EQ(moe::default_config(r, 1024, kSm70).to_string(), "threads=1024,tokens=32");
  // combine: two values a thread while the tokens' CTAs are few.
  const moe::Spec comb = moe::Spec::parse("moe:op=combine,topk=8,hidden=2048");
  EXPECT_EQ(moe::default_config(comb, 16, kSm70).threads, 1024);
  EXPECT_EQ(moe::default_config(comb, 1024, kSm70).threads, 256);
  EXPECT_EQ(moe::default_config(moe::Spec::parse("moe:op=combine,topk=1,hidden=7"), 1, kSm70).threads, 128);
}

TEST(MoeDecode, SpecConfigAndGeometry) {
  const Family& f = family_of("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=awq4");
  const std::string text =
      "moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=awq4,group=128,act_order=0";
  EXPECT_EQ(f.canonical_spec("moe:fmt=awq4,inter=768,hidden=2048,norm=1,topk=8,experts=128,op=decode"), text);
  EXPECT_EQ(f.canonical_spec("moe:op=decode,experts=60,topk=4,norm=0,hidden=2048,inter=1408,fmt=f16,shared=gated"),
            "moe:op=decode,experts=60,topk=4,norm=0,hidden=2048,inter=1408,shared=gated,fmt=f16,group=0,act_order=0");
  EXPECT_EQ(f.canonical_spec("moe:op=decode,experts=64,topk=6,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4,"
                             "hidden=320,inter=192,fmt=fp8b128"),
            "moe:op=decode,experts=64,topk=6,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4,hidden=320,inter=192,"
            "fmt=fp8b128,group=128,act_order=0");
  // Route's rules and both projections' (awq4's group must divide inter for down).
  expect_throw<InputError>(
      [&] { f.canonical_spec("moe:op=decode,experts=8,topk=2,norm=0,groups=2,hidden=256,inter=128,fmt=f16"); },
      {"score=sigmoid"});
  expect_throw<InputError>(
      [&] { f.canonical_spec("moe:op=decode,experts=8,topk=2,norm=0,hidden=256,inter=96,fmt=awq4"); },
      {"down projection", "group"});
  expect_throw<InputError>([&] { f.canonical_spec("moe:op=decode,experts=8,topk=2,hidden=256,inter=128,fmt=f16"); },
                           {"norm"});
  const moe::Spec s = moe::Spec::parse(text);
  EXPECT_EQ(moe::Config::parse(s, "warps=1,rows=4,down_rows=16,groups=8,occ=32").to_string(),
            "warps=1,rows=4,down_rows=16,groups=8,occ=32");
  expect_throw<InputError>([&] { moe::Config::parse(s, "warps=2,rows=4,down_rows=16,occ=32"); }, {"1024 threads"});
  EXPECT_EQ(s.projection(moe::Op::kGateUp).to_string(),
            "gemm:n=1536,k=2048,fmt=awq4,group=128,out=f16,epi=silu_mul,act_order=0");
  EXPECT_EQ(s.projection(moe::Op::kDown).to_string(),
            "gemm:n=2048,k=768,fmt=awq4,group=128,out=f32,epi=none,act_order=0");
  // While the pairs are no more than the experts: 16 tokens of top-8 over 128, 15 of top-4 over 60.
  EXPECT_EQ(moe::decode_max_tokens(s), 16);
  EXPECT_EQ(
      moe::decode_max_tokens(moe::Spec::parse("moe:op=decode,experts=60,topk=4,norm=0,hidden=64,inter=32,fmt=f16")),
      15);
  EXPECT_EQ(
      moe::decode_max_tokens(moe::Spec::parse("moe:op=decode,experts=4,topk=4,norm=0,hidden=64,inter=32,fmt=f16")), 1);
  // Models take it for one token with 4-bit experts only.
  EXPECT_EQ(moe::decode_layer_tokens(s), 1);
  EXPECT_EQ(moe::decode_layer_tokens(moe::Spec::parse("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=nvfp4")), 1);
  EXPECT_EQ(moe::decode_layer_tokens(moe::Spec::parse("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=fp8b128")), 0);
  EXPECT_EQ(moe::decode_layer_tokens(moe::Spec::parse("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=f16")), 0);
  // One warp (4-bit down rows are 24 chunks), 4 rows of h (4-bit) and 16 of y a CTA, down CTAs in
  // lane groups: 4-lane groups for int4 with zero points, 8-lane groups otherwise.
  const moe::Config c = moe::default_config(s, 1, Arch{90});
  EXPECT_EQ(c.to_string(), "warps=1,rows=4,down_rows=16,groups=8");
  EXPECT_EQ(moe::default_config(moe::Spec::parse("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=nvfp4"),
                                1, Arch{90})
                .to_string(),
            "warps=1,rows=4,down_rows=16,groups=4");
  EXPECT_EQ(f.canonical_config(text, "down_rows=16,rows=8,warps=1,groups=1"), "warps=1,rows=8,down_rows=16");
  EXPECT_EQ(f.canonical_config(text, "interleave=1,down_rows=16,rows=8,warps=1,groups=4"),
            "warps=1,rows=8,down_rows=16,groups=4,interleave=1");
  EXPECT_EQ(f.canonical_config(text, "warps=1,rows=8,down_rows=16,interleave=0"), "warps=1,rows=8,down_rows=16");
  EXPECT_EQ(c.cta_threads(), 32);
  EXPECT_EQ(c.decode_blocks(s, moe::Op::kGateUp), 192);
  EXPECT_EQ(c.decode_blocks(s, moe::Op::kDown), 128);
  EXPECT_EQ(moe::geometry(s, c, 3).grid[0], 3u * 8 * (192 + 128));
  EXPECT_EQ(moe::workspace_bytes(s, c, 3), 4 * (8 * 24 + 3 * 128));  // 32 bytes a pair, then a counter a row block
  EXPECT_EQ(moe::make_call(s, c, moe::Args{.tokens = 3}).count, 29);  // within KernelCall::kMaxArgs
  expect_throw<InputError>([&] { moe::Config::parse(s, "warps=2,rows=8,down_rows=16"); }, {"down CTAs", "24"});
  expect_throw<InputError>([&] { moe::Config::parse(s, "warps=1,rows=8,down_rows=16,groups=3"); }, {"down CTAs"});
  expect_throw<InputError>([&] { moe::Config::parse(s, "strategy=gemv,mt=1,rows=8,warps=1"); }, {"strategy"});
  // f16 rows are 96 chunks: two warps.
  const moe::Spec f16 = moe::Spec::parse("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=f16");
  EXPECT_EQ(moe::default_config(f16, 1, kSm70).to_string(), "warps=2,rows=8,down_rows=16");
  for (const char* t : {text.c_str(), "moe:op=decode,experts=7,topk=3,norm=0,hidden=64,inter=40,fmt=f16",
                        "moe:op=decode,experts=16,topk=3,norm=0,hidden=256,inter=192,fmt=gptq4,group=64,act_order=1",
                        "moe:op=decode,experts=60,topk=4,norm=1,hidden=2048,inter=1408,fmt=nvfp4,shared=gated"}) {
    const moe::Spec d = moe::Spec::parse(t);
    for (Arch arch : {kSm70, Arch{90}}) {
      const moe::Config def = moe::default_config(d, 1, arch);
      EXPECT_FALSE(def.invalid_reason(d)) << t;
      const auto candidates = moe::candidate_configs(d, arch);
      EXPECT_TRUE(std::find(candidates.begin(), candidates.end(), def) != candidates.end())
          << t << " " << def.to_string();
      for (const moe::Config& k : candidates) {
        EXPECT_FALSE(k.invalid_reason(d)) << t << " " << k.to_string();
        EXPECT_EQ(family_of(t).canonical_config(t, k.to_string()), k.to_string());
      }
      for (int64_t m = 1; m <= moe::decode_max_tokens(d) + 1; ++m) {
        EXPECT_EQ(moe::fits_bucket(d, def, m), m <= moe::decode_max_tokens(d)) << t << " m=" << m;
      }
    }
  }
}

// The argument order of each op's kernel (codegen/moe/emit.h): every pointer and stride a
// distinct value, read back from the packed call in the kernel signature's order.
TEST(MoeCall, ArgumentsInTheKernelsOrder) {
  moe::Args a;
  a.tokens = 3, a.scale = 2.5f;
  a.logits = 11, a.ids = 12, a.weights = 13, a.offsets = 14, a.sorted = 15, a.bias = 16, a.workspace = 17;
  a.x = 21, a.h = 22, a.y = 23, a.out = 24, a.shared = 25, a.shared_gate = 26, a.slot = 27;
  a.experts = {31, 32, 33, 34, 35, 36, 37, 38};
  a.down = {41, 42, 43, 44, 45, 46, 47, 48};
  auto values = [](const KernelCall& call) {
    std::vector<uint64_t> v;
    for (int i = 0; i < call.count; ++i) {
      uint64_t x = 0;
      std::memcpy(&x, call.values[size_t(i)].data(), 8);
      v.push_back(x);
    }
    return v;
  };
  auto with = [](const char* text) {
    const moe::Spec s = moe::Spec::parse(text);
    return std::pair{s, moe::default_config(s, 1, Arch{90})};
  };
  uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &a.scale, 4);
  // gptq4 act_order: perm is passed (0 without act_order).
  const auto [down, down_c] = with("moe:op=down,experts=16,topk=3,hidden=256,inter=192,fmt=gptq4,group=64,act_order=1");
  EXPECT_EQ(values(moe::make_call(down, down_c, a)),
            (std::vector<uint64_t>{23, 22, 31, 32, 33, 34, 35, 14, 15, 27, 36, 37, 38}));
  const auto [up, up_c] = with("moe:op=gate_up,experts=16,topk=3,hidden=256,inter=192,fmt=f16");
  EXPECT_EQ(values(moe::make_call(up, up_c, a)),
            (std::vector<uint64_t>{22, 21, 31, 32, 33, 0, 35, 14, 15, 27, 36, 37, 38}));
  const auto [dec, dec_c] = with(
      "moe:op=decode,experts=16,topk=3,norm=1,score=sigmoid,bias=1,hidden=256,inter=192,shared=gated,fmt=gptq4,"
      "group=64,act_order=1");
  EXPECT_EQ(values(moe::make_call(dec, dec_c, a)),
            (std::vector<uint64_t>{24, 21, 11, 3,  16, scale_bits, 31, 32, 33, 34, 35, 36, 37, 38, 41,
                                   42, 43, 44, 45, 46, 47,         48, 22, 23, 25, 26, 12, 13, 17}));
  const auto [route, route_c] = with("moe:op=route,experts=16,topk=3,norm=1");
  EXPECT_EQ(values(moe::make_call(route, route_c, a)),
            (std::vector<uint64_t>{12, 13, 14, 15, 11, 3, 0, scale_bits, 17}));
  const auto [comb, comb_c] = with("moe:op=combine,topk=3,hidden=256,shared=plain");
  EXPECT_EQ(values(moe::make_call(comb, comb_c, a)), (std::vector<uint64_t>{24, 23, 13, 3, 25, 0}));
}

TEST(MoeGeometry, TheGridCoversEveryRouting) {
  // Tiles actually needed (each expert's pairs in tiles of mt) never exceed the grid's, on
  // routings from all tokens on the same experts to every pair on its own expert.
  std::mt19937 rng(3);
  for (const char* text : {"moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4",
                           "moe:op=down,experts=7,topk=3,hidden=256,inter=192,fmt=f16"}) {
    const moe::Spec s = moe::Spec::parse(text);
    for (const moe::Config& c : moe::candidate_configs(s, Arch{90})) {
      for (int64_t m : {1, 2, 5, 16, 100}) {
        const unsigned grid = moe::geometry(s, c, m).grid[1];
        for (int mode = 0; mode < 3; ++mode) {
          std::vector<int32_t> ids(size_t(m * s.topk));
          std::vector<int32_t> all(size_t(s.experts));
          for (int e = 0; e < s.experts; ++e) all[size_t(e)] = e;
          for (int64_t t = 0; t < m; ++t) {
            if (mode == 1) std::shuffle(all.begin(), all.end(), rng);
            for (int k = 0; k < s.topk; ++k) {
              // mode 0: all on experts 0..topk-1; 1: random; 2: spread round-robin.
              ids[size_t(t * s.topk + k)] = mode == 2 ? int32_t((t * s.topk + k) % s.experts) : all[size_t(k)];
            }
          }
          std::vector<int32_t> offsets, sorted;
          cpu::moe_group(ids, s.experts, offsets, sorted);
          int64_t tiles = 0;
          for (int e = 0; e < s.experts; ++e) tiles += (offsets[size_t(e) + 1] - offsets[size_t(e)] + c.tile_pairs() - 1) / c.tile_pairs();
          EXPECT_LE(tiles, int64_t(grid)) << text << " [" << c.to_string() << "] m=" << m << " mode " << mode;
        }
      }
    }
  }
}

TEST(MoeStaticQuality, DefaultsCompileWithoutSpillsForSm70AndSm90) {
  std::vector<std::string> specs = {"moe:op=route,experts=128,topk=8,norm=1", "moe:op=route,experts=512,topk=16,norm=0",
                                    "moe:op=combine,topk=8,hidden=2048", "moe:op=combine,topk=4,hidden=2048,shared=gated",
                                    "moe:op=route,experts=256,topk=8,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4"};
  for (const char* fmt : {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    for (const char* op : {"gate_up", "down"}) {
      specs.push_back(std::string("moe:op=") + op + ",experts=128,topk=8,hidden=2048,inter=768,fmt=" + fmt);
    }
  }
  specs.push_back("moe:op=gate_up,experts=16,topk=3,hidden=256,inter=192,fmt=gptq4,group=64,act_order=1");
  // Qwen3-235B-A22B's down projection (48 chunks a 4-bit row: two lane groups at occ=32).
  for (const char* fmt : {"awq4", "nvfp4", "mxfp4"}) {
    specs.push_back(std::string("moe:op=down,experts=128,topk=8,hidden=4096,inter=1536,fmt=") + fmt);
  }
  // The one-launch decode layer in every format, with act-order, a sigmoid router and a shared expert.
  for (const char* fmt : {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    specs.push_back(std::string("moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=") + fmt);
  }
  specs.push_back("moe:op=decode,experts=16,topk=3,norm=0,hidden=256,inter=192,fmt=gptq4,group=64,act_order=1");
  specs.push_back(
      "moe:op=decode,experts=64,topk=6,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4,hidden=320,inter=192,"
      "shared=plain,fmt=fp8b128");
  specs.push_back("moe:op=decode,experts=60,topk=4,norm=0,hidden=2048,inter=1408,shared=gated,fmt=awq4");
  // CTAs of three groups of rows in every format, on a layer whose 320 down rows leave the last
  // CTA one group short.
  std::vector<std::string> looped;
  for (const char* fmt : {"f16", "awq4,group=64", "gptq4,group=64,act_order=1", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    for (const char* op : {"gate_up", "down"}) {
      looped.push_back(std::string("moe:op=") + op + ",experts=16,topk=3,hidden=320,inter=192,fmt=" + fmt);
    }
  }
  for (Arch arch : {Arch{70}, Arch{90}}) {
    std::vector<CompileRequest> reqs;
    for (const std::string& spec : specs) {
      const Family& f = family_of(spec);
      std::set<std::string> configs;
      for (int64_t m : {1, 4, 16, 512, 4096}) configs.insert(f.default_config(spec, m, arch));
      for (const auto& c : configs) reqs.push_back(CompileRequest::make(f, spec, c, arch));
    }
    for (const std::string& spec : looped) {
      reqs.push_back(CompileRequest::make(family_of(spec), spec, "strategy=gemv,mt=2,rows=8,warps=1,loop=3", arch));
      // One 16-row slot per group of 2 lanes (every format's rows here are an even number of chunks).
      const bool down = spec.find("op=down") != std::string::npos;
      reqs.push_back(CompileRequest::make(family_of(spec), spec,
                                          down ? "strategy=gemv,mt=2,rows=16,warps=1,loop=3,groups=16"
                                               : "strategy=gemv,mt=2,rows=8,warps=1,loop=3,groups=16",
                                          arch));
    }
    if (arch.has_mma_m16n8k16()) {  // tc_small, every format on the 128-expert layer
      for (const std::string& spec : specs) {
        if (spec.find("op=gate_up") == std::string::npos && spec.find("op=down") == std::string::npos) continue;
        for (const char* config :
             {"strategy=tc_small,mt=8,rows=16,warps=2,stages=3", "strategy=tc_small,mt=16,rows=32,warps=4,stages=1"}) {
          try {
            moe::Config::parse(moe::Spec::parse(spec), config);
          } catch (const InputError&) {
            continue;  // more accumulators than this format's rows allow
          }
          reqs.push_back(CompileRequest::make(family_of(spec), spec, config, arch));
        }
      }
    }
    ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, false));
  }
}

}  // namespace
}  // namespace onecat
