// The tuner's CPU side: buckets, candidate lists, the deterministic choice, and dispatch.
#include "tuner/tuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "base/error.h"
#include "base/half.h"
#include "codegen/family.h"
#include "models/plan.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/dispatch.h"
#include "runtime/engine/gemm_launch.h"
#include "tests/test_util.h"
#include "tuner/bench.h"
#include "tuner/gemm_rig.h"
#include "tuner/output_compare.h"
#include "tuner/random_weight.h"

namespace onecat {
namespace {

CandidateTiming ok(const std::string& config, double us, double spread = 0.1) {
  return CandidateTiming{config, "ok", us, us - spread / 2, us + spread / 2, ""};
}

TEST(Tuner, BucketsArePowersOfTwo) {
  EXPECT_EQ(bucket_for(1), 1);
  EXPECT_EQ(bucket_for(3), 4);
  EXPECT_EQ(bucket_for(16), 16);
  EXPECT_EQ(bucket_for(17), 32);
  EXPECT_EQ(bucket_for(100000), kMaxBucket);
  EXPECT_THROW(bucket_for(0), InputError);
  EXPECT_EQ(Dispatcher::bucket_index(1), 0);
  EXPECT_EQ(Dispatcher::bucket_index(5), 3);
  EXPECT_EQ(Dispatcher::bucket_index(4096), 12);
  EXPECT_EQ(Dispatcher::bucket_index(1 << 20), 12);
  // One rule (cache/record.h) behind the tuner, the dispatcher, import and argument checks.
  for (int64_t m = 1; m <= 5000; ++m) {
    int64_t want = 1;
    while (want < m && want < kMaxBucket) want *= 2;
    ASSERT_EQ(bucket_for(m), want) << m;
    ASSERT_EQ(int64_t(1) << Dispatcher::bucket_index(m), want) << m;
    ASSERT_EQ(is_bucket(m), m == want && m <= kMaxBucket) << m;
  }
  EXPECT_FALSE(is_bucket(0));
  EXPECT_FALSE(is_bucket(-4));
  EXPECT_FALSE(is_bucket(8192));
  EXPECT_FALSE(is_bucket(int64_t(1) << 62));
  EXPECT_EQ(Dispatcher::kBuckets, 13);
}

TEST(Tuner, ChoiceIsFastestUnlessTheDefaultOrAnEarlierOneIsWithinNoise) {
  // Clear winner.
  EXPECT_EQ(choose_config({ok("a", 10), ok("b", 5), ok("c", 7)}, "a"), 1);
  // The default within 1% of the fastest wins; 2% slower it does not.
  EXPECT_EQ(choose_config({ok("a", 100.9), ok("b", 100.0), ok("c", 120)}, "a"), 0);
  EXPECT_EQ(choose_config({ok("a", 102.0), ok("b", 100.0), ok("c", 120)}, "a"), 1);
  // Without the default in the band, the earliest in candidate order wins.
  EXPECT_EQ(choose_config({ok("d", 200), ok("b", 100.5), ok("c", 100.0)}, "d"), 1);
  // A candidate's own min–max spread does not widen the band.
  EXPECT_EQ(choose_config({ok("a", 104.0), ok("b", 100.0, 25)}, "a"), 1);
  // The band is an argument.
  EXPECT_EQ(choose_config({ok("a", 104.0), ok("b", 100.0)}, "a", 0.05), 0);
  // Wrong, spilling or failed candidates are never chosen, however fast.
  std::vector<CandidateTiming> t = {ok("a", 10), {"b", "wrong", 1, 1, 1, "err"}, {"c", "spills", 2, 2, 2, ""}};
  EXPECT_EQ(choose_config(t, "b"), 0);
  EXPECT_EQ(choose_config({{"a", "wrong", 1, 1, 1, ""}, {"b", "compile_error", 0, 0, 0, ""}}, "a"), -1);
  // Deterministic: the same input gives the same answer.
  std::vector<CandidateTiming> same = {ok("x", 5), ok("y", 5), ok("z", 5)};
  EXPECT_EQ(choose_config(same, "none"), 0);
  EXPECT_EQ(choose_config(same, "z"), 2);
}

TEST(Tuner, CandidatesStartWithTheDefaultAndFitTheBucket) {
  for (const char* spec : {"gemm:n=4096,k=4096,fmt=awq4", "gemm:n=1000,k=1024,fmt=f16,epi=silu_mul",
                           "rmsnorm:hidden=4096,dtype=f16,residual=1"}) {
    const Family& f = family_of(spec);
    for (int64_t m : {1, 4, 16, 64, 512}) {
      auto c = tuning_candidates(f, spec, m, Arch{70});
      ASSERT_FALSE(c.empty());
      // The default that runs here first (cuBLAS's where it can run), then onecat's own if different.
      EXPECT_EQ(c[0], default_config_here(f, spec, m, 70)) << spec << " m=" << m;
      EXPECT_EQ(std::set<std::string>(c.begin(), c.end()).size(), c.size());
      const std::string own = f.default_config(spec, m, Arch{70});
      for (size_t i = 1; i < c.size(); ++i) EXPECT_TRUE(c[i] == own || f.fits_bucket(spec, c[i], m)) << c[i];
    }
  }
  // gemv candidates at M=4 all use 4-token tiles; M=512 has tensor-core tiles.
  const std::string g = "gemm:n=4096,k=4096,fmt=awq4";
  for (const auto& c : tuning_candidates(family_of(g), g, 4, Arch{70})) EXPECT_NE(c.find("mt=4"), std::string::npos) << c;
  bool mma = false;
  for (const auto& c : tuning_candidates(family_of(g), g, 512, Arch{70})) mma |= c.starts_with("strategy=mma");
  EXPECT_TRUE(mma);
}

TEST(Dispatch, ResolvesOncePerSpecAndBucketThenReadsTheTable) {
  int calls = 0;
  Dispatcher d([&](const std::string& spec, int64_t bucket) {
    ++calls;
    return DispatchEntry{nullptr, spec + "@" + std::to_string(bucket), bucket == 1};
  });
  const int a = d.add_spec("gemm:a"), b = d.add_spec("gemm:b");
  EXPECT_EQ(d.add_spec("gemm:a"), a);
  EXPECT_EQ(d.kernel_for(a, 3).config, "gemm:a@4");
  EXPECT_EQ(d.kernel_for(a, 4).config, "gemm:a@4");
  EXPECT_EQ(d.kernel_for(a, 1).config, "gemm:a@1");
  EXPECT_TRUE(d.kernel_for(a, 1).tuned);
  EXPECT_EQ(d.kernel_for(b, 700).config, "gemm:b@1024");
  EXPECT_EQ(calls, 3);
  for (int i = 0; i < 1000; ++i) d.kernel_for(a, i % 2 ? 1 : 3 + i % 2);
  EXPECT_EQ(calls, 3);
}

// The prewarm compiles both untuned defaults of a gemm where cuBLAS would be the default on a
// machine that has one (f16 from 17 tokens, packed formats from 512): the family's own kernel
// and strategy=cublas's; below that only the own. A decode step's fused gemms (norm=rms,
// epi=residual), planned where the GPU fuses norms, run at up to 16 tokens only: their gemv at
// bucket 16 alone.
TEST(TuneCli, CompileOnlyCompilesBothUntunedGemmDefaults) {
  test::TempDir dir;
  const std::string env = "ONECAT_CACHE_DIR=" + dir.path() + "/cache ONECAT_DEBUG= ";
  for (const char* model : {"qwen3-8b", "qwen3-8b:awq4"}) {
    const test::CommandResult r = test::run_command(
        env + ONECAT_BIN + " tune --model " + model + " --compile-only --arch sm_70 --families gemm --buckets 16,32,512 --json",
        dir.path());
    ASSERT_EQ(r.status, 0) << r.err;
    std::map<std::string, int> own, cublas;  // spec → kernels; buckets of cublas's
    std::set<std::string> specs;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    for (const auto& k : out["kernels"]) {
      const std::string spec = k["spec"], buckets = k["buckets"];
      specs.insert(spec);
      if (k["config"] == "strategy=cublas") {
        const bool f16 = spec.find("fmt=f16,") != std::string::npos;  // a packed model's lm_head too
        EXPECT_EQ(buckets, f16 ? "32,512" : "512") << model << " " << spec;
        ++cublas[spec];
      } else {
        ++own[spec];
      }
    }
    ASSERT_FALSE(specs.empty()) << r.out.substr(0, 400);
    int fused = 0;
    for (const std::string& spec : specs) {
      const bool decode_only =
          spec.find(",norm=rms") != std::string::npos || spec.find("epi=residual") != std::string::npos;
      fused += decode_only;
      EXPECT_EQ(cublas[spec], decode_only ? 0 : 1) << spec;
      EXPECT_GE(own[spec], 1) << spec;
    }
    EXPECT_EQ(fused, models::kGpuFusesNorms ? 4 : 0) << model;
    for (const auto& k : out["kernels"]) {
      const std::string spec = k["spec"];
      if (spec.find(",norm=rms") != std::string::npos) {
        EXPECT_EQ(k["buckets"], "16") << spec;
      }
    }
    // sm_90 fuses a decode step's norms at up to 2 tokens (the gemv's range there): bucket 16's
    // fused gemms are not compiled, bucket 2's are.
    const test::CommandResult r90 =
        test::run_command(env + ONECAT_BIN + " tune --model " + model +
                              " --compile-only --arch sm_90 --families gemm --buckets 2,16 --json",
                          dir.path());
    ASSERT_EQ(r90.status, 0) << r90.err;
    int fused90 = 0;
    const nlohmann::json out90 = nlohmann::json::parse(r90.out);
    for (const auto& k : out90["kernels"]) {
      const std::string spec = k["spec"];
      if (spec.find(",norm=rms") != std::string::npos || spec.find("epi=residual") != std::string::npos) {
        EXPECT_EQ(k["buckets"], "2") << spec;
        ++fused90;
      }
    }
    EXPECT_EQ(fused90, models::kGpuFusesNorms ? 4 : 0) << model;
  }
}

// `onecat tune` without a GPU: the sm_70 prewarm works, tuning says it needs a GPU, bad
// input exits 2 with one line.
TEST(TuneCli, CompileOnlyPrewarmsTheCacheWithoutAGpu) {
  test::TempDir dir;
  const std::string env = "ONECAT_CACHE_DIR=" + dir.path() + "/cache ONECAT_DEBUG= ";
  const std::string bin = std::string(ONECAT_BIN) + " tune --model qwen3-8b:awq4 ";
  test::CommandResult r =
      test::run_command(env + bin + "--compile-only --arch sm_70 --buckets 1,512 --families rmsnorm --json", dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["arch"], "sm_70");
  ASSERT_FALSE(j["kernels"].empty());
  for (const auto& k : j["kernels"]) {
    EXPECT_TRUE(k["spec"].get<std::string>().starts_with("rmsnorm:")) << k.dump();
    EXPECT_EQ(k["spill_bytes"], 0) << k.dump();
    EXPECT_FALSE(k["cache_hit"].get<bool>());
  }
  // Again: everything is a cache hit.
  r = test::run_command(env + bin + "--compile-only --arch sm_70 --buckets 1,512 --families rmsnorm --json", dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  // (The parsed document named first: a range-for over a temporary's ["kernels"] would read freed memory.)
  const nlohmann::json again = nlohmann::json::parse(r.out);
  ASSERT_EQ(again["kernels"].size(), j["kernels"].size());
  for (const auto& k : again["kernels"]) EXPECT_TRUE(k["cache_hit"].get<bool>());

  if (Driver::find() == nullptr || Driver::find()->device_count() == 0) {
    r = test::run_command(env + bin + "--buckets 1 --families rmsnorm", dir.path());
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(test::contains(r.err, "needs an NVIDIA GPU")) << r.err;
  }
  for (const char* bad : {"--model no-such-model --compile-only --arch sm_70", "--model qwen3-8b --buckets 3 --compile-only",
                          "--model qwen3-8b --families no_such_family --compile-only", "--model qwen3-8b --arch sm_70",
                          "--model qwen3-8b --kv-cache-dtype int8 --compile-only --arch sm_70"}) {
    r = test::run_command(env + std::string(ONECAT_BIN) + " tune " + bad, dir.path());
    EXPECT_EQ(r.status, 2) << bad << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("onecat: error:")) << bad << ": " << r.err;
  }
}

// The sm_70 prewarm compiles the model's attention kernels too: one per distinct default
// config over the buckets, each with no spill (qwen3-8b: head_dim 128, fp16 KV cache, or fp8
// E4M3 with a per-tensor scale under --kv-cache-dtype fp8).
class TuneCliKv : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(TuneCliKv, CompileOnlyPrewarmsAttention) {
  const auto [flag, kv] = GetParam();
  test::TempDir dir;
  const std::string cmd = "ONECAT_CACHE_DIR=" + dir.path() + "/cache ONECAT_DEBUG= " + ONECAT_BIN +
                          " tune --model qwen3-8b:awq4 --compile-only --arch sm_70 --families attention --buckets 1,16 --json" + flag;
  const test::CommandResult r = test::run_command(cmd, dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> ops;
  for (const auto& k : j["kernels"]) {
    const std::string spec = k["spec"].get<std::string>();
    ASSERT_TRUE(spec.starts_with("attention:")) << k.dump();
    EXPECT_TRUE(test::contains(spec, "dim=128") && test::contains(spec, kv)) << spec;
    EXPECT_EQ(k["spill_bytes"], 0) << k.dump();
    EXPECT_GT(k["registers"].get<int>(), 0) << k.dump();
    ops.insert(spec.substr(0, spec.find(',')));
  }
  // The plan's rope op writes the K/V cache: no kv_write op.
  EXPECT_EQ(ops, (std::set<std::string>{"attention:op=decode", "attention:op=prefill", "attention:op=verify"}));
  // Every bucket of every spec has its kernel.
  std::map<std::string, std::string> buckets;
  for (const auto& k : j["kernels"]) {
    auto& b = buckets[k["spec"].get<std::string>()];
    b += (b.empty() ? "" : ",") + k["buckets"].get<std::string>();
  }
  ASSERT_EQ(buckets.size(), 3u);
  for (const auto& [spec, list] : buckets) EXPECT_EQ(list, "1,16") << spec;
}

INSTANTIATE_TEST_SUITE_P(KvCache, TuneCliKv,
                         ::testing::Values(std::pair<std::string, std::string>{"", "kv=f16,kv_scale=none"},
                                           std::pair<std::string, std::string>{" --kv-cache-dtype fp8", "kv=e4m3,kv_scale=tensor"}));

// The gemm checks' output comparison (many threads, fixed chunks) gives the serial sums, finds
// the first non-finite output wherever it lies, and reads fp16 and fp32 outputs.
TEST(OutputCompare, MatchesASerialSumAndFindsTheFirstNonFinite) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  const int64_t count = 300000;  // several chunks, the last one partial
  std::vector<float> want(static_cast<size_t>(count));
  for (auto& w : want) w = u(rng);
  const std::vector<float> rounded = round_to_half(want);
  std::vector<uint16_t> got16(static_cast<size_t>(count));
  std::vector<float> got32(static_cast<size_t>(count));
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < count; ++i) {
    EXPECT_EQ(rounded[size_t(i)], cpu::half_to_float(cpu::float_to_half(want[size_t(i)])));
    got32[size_t(i)] = want[size_t(i)] + (i % 3 == 0 ? 0.01f : 0.f);
    got16[size_t(i)] = cpu::float_to_half(got32[size_t(i)]);
    const double g = cpu::half_to_float(got16[size_t(i)]);
    diff2 += (g - rounded[size_t(i)]) * (g - rounded[size_t(i)]);
    ref2 += double(rounded[size_t(i)]) * rounded[size_t(i)];
  }
  const OutputDiff h = compare_outputs(reinterpret_cast<const uint8_t*>(got16.data()), false, rounded.data(), 1, count, {});
  EXPECT_NEAR(h.diff2, diff2, 1e-9 * diff2);
  EXPECT_NEAR(h.ref2, ref2, 1e-12 * ref2);
  EXPECT_EQ(h.first_nonfinite, -1);
  const OutputDiff again = compare_outputs(reinterpret_cast<const uint8_t*>(got16.data()), false, rounded.data(), 1, count, {});
  EXPECT_EQ(again.diff2, h.diff2) << "the same sums on every run";
  const OutputDiff exact = compare_outputs(reinterpret_cast<const uint8_t*>(want.data()), true, want.data(), 1, count, {});
  EXPECT_EQ(exact.diff2, 0.0);
  got32[250001] = std::numeric_limits<float>::quiet_NaN();
  got32[70000] = std::numeric_limits<float>::infinity();
  const OutputDiff bad = compare_outputs(reinterpret_cast<const uint8_t*>(got32.data()), true, want.data(), 1, count, {});
  EXPECT_EQ(bad.first_nonfinite, 70000);
  EXPECT_TRUE(std::isinf(bad.nonfinite_value));
  got16[299999] = 0xffff;  // fp16 NaN (the poison byte pattern)
  const OutputDiff poisoned =
      compare_outputs(reinterpret_cast<const uint8_t*>(got16.data()), false, rounded.data(), 1, count, {});
  EXPECT_EQ(poisoned.first_nonfinite, 299999);
}

// A norm over 1031 × 4097 outputs lets tens of completely wrong ones through; the gemm check's
// element-wise bound does not. Realistic kernel error (well inside the norm) passes it.
TEST(OutputCompare, PlantedWrongElementsFailTheGemmCheckThatTheNormPasses) {
  const gemm::Spec spec = gemm::Spec::parse("gemm:n=4097,k=4096,fmt=awq4");
  const int64_t rows = 1031, cols = 4097;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> value(0.f, 1.f), noise(0.f, 4e-4f);
  std::vector<float> want(size_t(rows * cols)), got(want.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = value(rng), got[i] = want[i] + noise(rng) * std::abs(value(rng));
  const std::vector<float> want16 = round_to_half(want);
  std::vector<uint16_t> got16(got.size());
  for (size_t i = 0; i < got.size(); ++i) got16[i] = cpu::float_to_half(got[i]);
  auto check = [&] {
    return compare_outputs(reinterpret_cast<const uint8_t*>(got16.data()), false, want16.data(), rows, cols,
                           element_bound(spec));
  };
  const OutputDiff clean = check();
  EXPECT_EQ(clean.elements_over, 0) << "a correct output at y[" << clean.first_over / cols << "][" << clean.first_over % cols
                                    << "]: " << clean.first_over_got << " vs " << clean.first_over_want;
  EXPECT_LT(std::sqrt(clean.diff2 / clean.ref2), gemm_tolerance(spec));

  // A split-K race leaving 40 outputs of a tile unwritten (zero) that the norm would let through.
  std::uniform_int_distribution<int64_t> at(0, rows * cols - 1);
  std::set<int64_t> planted;
  while (planted.size() < 40) {
    const int64_t i = at(rng);
    if (std::abs(want16[size_t(i)]) < 0.25f || std::abs(want16[size_t(i)]) > 1.f) continue;
    planted.insert(i);
    got16[size_t(i)] = 0;
  }
  const OutputDiff bad = check();
  EXPECT_LT(std::sqrt(bad.diff2 / bad.ref2), gemm_tolerance(spec)) << "the norm alone would pass it";
  EXPECT_EQ(bad.elements_over, 40);
  EXPECT_EQ(bad.first_over, *planted.begin());
}

// The tuner's and `onecat bench`'s random weights under silu_mul: SiLU(gate)·up multiplies two
// dot products over K, so weights scaled for one overflowed fp16 at K = 4096 (Llama's gate_up
// in fp8b32 and mxfp4: the kernel and the reference both inf, and the check failed on NaN).
// Every format's outputs, from the rig's inputs (x in ±2), stay well inside fp16.
TEST(RandomWeight, SiluMulOutputsStayInsideFp16) {
  for (const char* fmt : {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    const gemm::Spec s = gemm::Spec::parse(std::string("gemm:n=512,k=4096,fmt=") + fmt + ",epi=silu_mul");
    std::mt19937_64 rng(7);
    const quant::PackedWeight w = random_packed_weight(s, rng);
    const int64_t m = 32;
    const std::vector<uint16_t> x = random_half(rng, size_t(m * s.k), -2.f, 2.f);
    std::vector<float> y(size_t(m * s.out_cols()));
    cpu::GemmEpilogue epi;
    epi.kind = cpu::GemmEpilogue::kSiluMul;
    cpu::gemm(w, x.data(), m, epi, y.data());
    float most = 0;
    for (float v : y) most = std::max(most, std::isfinite(v) ? std::abs(v) : std::numeric_limits<float>::infinity());
    EXPECT_LT(most, 65504.f / 4) << fmt;
  }
}

// `onecat bench --shapes`: every line is checked before anything runs, and a bad one is named
// by file and line.
TEST(BenchShapes, ParsesPointsAndNamesTheBadLine) {
  const std::vector<BenchShape> shapes = parse_bench_shapes(
      "# issue 27's points\n"
      "gemm:n=4096,k=4096,fmt=awq4 17,33,128   # a comment after a point\n"
      "\n"
      "attention:op=decode,heads=28,kv_heads=4,dim=128,page=16,kv=f16 1,8 ctx=8192\n"
      "  attention:op=verify,heads=32,kv_heads=8,dim=128,page=64,kv=e4m3,q=4 2 ctx=1024\n",
      "points.txt");
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[0].spec, family_of(shapes[0].spec).canonical_spec("gemm:n=4096,k=4096,fmt=awq4"));
  EXPECT_EQ(shapes[0].ms, (std::vector<int64_t>{17, 33, 128}));
  EXPECT_EQ(shapes[0].context, 0);
  EXPECT_EQ(shapes[0].line, 2);
  EXPECT_EQ(shapes[1].ms, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(shapes[1].context, 8192);
  EXPECT_EQ(shapes[1].line, 4);
  EXPECT_EQ(shapes[2].context, 1024);
  EXPECT_EQ(shapes[2].line, 5);

  const std::string decode = "attention:op=decode,heads=8,kv_heads=2,dim=128,page=16,kv=f16";
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"gemm:n=64,k=64,fmt=f16 1\nnope:n=1 1\n", "line 2"},
           {"gemm:n=64,k=64,fmt=f16 1\nnope:n=1 1\n", "known: "},
           {"gemm:n=64,k=64,fmt=f16\n", "expected `SPEC M[,M…] [ctx=N]`"},
           {"gemm:n=64,k=64,fmt=f16 1 ctx=64 extra\n", "4 fields"},
           {"gemm:n=64,k=64,fmt=f16 0\n", "is not a token count"},
           {"gemm:n=64,k=64,fmt=f16 1,x\n", "'x'"},
           {"gemm:n=64,k=64,fmt=f16 1 ctx=64\n", "attention decode and verify only"},
           {"attention:op=prefill,heads=8,kv_heads=2,dim=128,page=16,kv=f16 64 ctx=64\n", "decode and verify only"},
           {decode + " 1 keys=64\n", "must be ctx=N"},
           {decode + " 1 ctx=1,2\n", "one key count"},
           {decode + " 1 ctx=-4\n", "is not a token count"},
           {"# nothing but comments\n\n", "lists no shape"},
       }) {
    SCOPED_TRACE(text);
    try {
      parse_bench_shapes(text, "points.txt");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_TRUE(test::contains(e.what(), says)) << e.what();
      EXPECT_TRUE(test::contains(e.what(), "points.txt")) << e.what();
    }
  }
  EXPECT_EQ(parse_token_counts("1,2,16", "--m"), (std::vector<int64_t>{1, 2, 16}));
  EXPECT_THROW(parse_token_counts("", "--m"), InputError);
  EXPECT_THROW(parse_token_counts("1,,2", "--m"), InputError);
  EXPECT_THROW(parse_token_counts("2097152", "--m"), InputError);
}

}  // namespace
}  // namespace onecat
