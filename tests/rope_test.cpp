// The rope family on the CPU: rope_table against closed forms of transformers' RoPE
// initialisations, rope_qkv against an independent long-double evaluation, spec and config
// text, defaults and candidates, and the static quality of the generated code (NVRTC for sm_70
// and sm_90: no spills, no local memory).
#include "runtime/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <set>
#include <vector>

#include "runtime/cpu/embedding.h"
#include "base/half.h"
#include "base/error.h"
#include "codegen/family.h"
#include "codegen/rope/config.h"
#include "codegen/rope/space.h"
#include "codegen/rope/spec.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/compiler.h"
#include "tests/compile_checks.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using cpu::RopeParams;
using Scaling = RopeParams::Scaling;
using ld = long double;

// |a − b| in units of b's fp32 spacing.
double fp32_ulps(float a, ld b) {
  return double(std::fabs(ld(a) - b) / ld(std::nextafter(float(b), INFINITY) - float(b)));
}

// transformers' θ^(−2i/d) with its fp32 exponent (not a rounding of ours: the definition).
ld base_inv_freq(ld theta, int i, int dim) { return std::pow(theta, -ld(float(2 * i) / float(dim))); }

TEST(RopeTable, DefaultAndLinearMatchTheClosedForm) {
  for (int dim : {64, 96, 128, 256}) {
    for (double theta : {10000.0, 500000.0, 1000000.0}) {
      RopeParams p;
      p.theta = theta;
      const cpu::RopeTable t = cpu::rope_table(p, dim);
      ASSERT_EQ(t.inv_freq.size(), size_t(dim / 2));
      EXPECT_EQ(t.attention_factor, 1.f);
      EXPECT_EQ(t.inv_freq[0], 1.f);
      for (int i = 0; i < dim / 2; ++i) {
        // Two fp32 roundings (the power, then its reciprocal) and the fp32 exponent.
        EXPECT_LE(fp32_ulps(t.inv_freq[size_t(i)], base_inv_freq(theta, i, dim)), 3) << dim << " " << theta << " " << i;
      }
      p.scaling = Scaling::kLinear;
      p.factor = 2.5;
      const cpu::RopeTable lin = cpu::rope_table(p, dim);
      for (int i = 0; i < dim / 2; ++i) {
        EXPECT_LE(fp32_ulps(lin.inv_freq[size_t(i)], base_inv_freq(theta, i, dim) / 2.5L), 4) << i;
      }
    }
  }
}

// Llama 3.1: theta 5e5, dim 128, factor 8, frequency factors 1 and 4, original context 8192.
// A frequency whose wavelength 2π/f is below 8192/4 is kept, above 8192/1 divided by 8, and
// one between blended by s = (8192/wavelength − 1)/(4 − 1): f·((1 − s)/8 + s).
TEST(RopeTable, Llama3KeepsBlendsAndDividesItsThreeBands) {
  RopeParams p;
  p.scaling = Scaling::kLlama3;
  p.theta = 500000;
  p.factor = 8;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  p.original_max_position = 8192;
  const int dim = 128;
  const cpu::RopeTable t = cpu::rope_table(p, dim);
  int kept = 0, blended = 0, divided = 0;
  for (int i = 0; i < dim / 2; ++i) {
    const ld f = base_inv_freq(p.theta, i, dim);
    const ld wavelen = 2 * std::numbers::pi_v<ld> / f;
    ld want;
    if (wavelen < 8192.0L / 4) {
      want = f;
      ++kept;
    } else if (wavelen > 8192.0L) {
      want = f / 8;
      ++divided;
    } else {
      const ld s = (8192.0L / wavelen - 1) / 3;
      want = f * ((1 - s) / 8 + s);
      ++blended;
    }
    EXPECT_LE(fp32_ulps(t.inv_freq[size_t(i)], want), 8) << i;
  }
  // The band edges in closed form: 2π·θ^(2i/d) < 2048 ⇔ i < (d/2)·ln(2048/2π)/ln θ, etc.
  const ld log_theta = std::log(ld(p.theta));
  const int first_not_kept = int(std::ceil(64 * std::log(2048 / (2 * std::numbers::pi_v<ld>)) / log_theta));
  const int first_divided = int(std::floor(64 * std::log(8192 / (2 * std::numbers::pi_v<ld>)) / log_theta)) + 1;
  EXPECT_EQ(kept, first_not_kept);
  EXPECT_EQ(divided, 64 - first_divided);
  EXPECT_EQ(blended, first_divided - first_not_kept);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(t.attention_factor, 1.f);
}

// YaRN: dims below the correction range keep their frequency, those above are divided by the
// factor, a linear ramp between; the attention factor is 0.1·ln(factor) + 1 by default.
TEST(RopeTable, YarnRampsBetweenTheCorrectionDims) {
  for (bool truncate : {true, false}) {
    RopeParams p;
    p.scaling = Scaling::kYarn;
    p.theta = 1000000;
    p.factor = 4;
    p.original_max_position = 32768;
    p.truncate = truncate;
    const int dim = 128;
    const cpu::RopeTable t = cpu::rope_table(p, dim);
    EXPECT_NEAR(t.attention_factor, 0.1 * std::log(4.0) + 1, 1e-6);
    // The dim index that turns `rotations` times over the original context.
    auto correction = [&](ld rotations) {
      return dim * std::log(32768 / (rotations * 2 * std::numbers::pi_v<ld>)) / (2 * std::log(ld(p.theta)));
    };
    ld low = correction(32), high = correction(1);
    if (truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    int kept = 0, divided = 0;
    for (int i = 0; i < dim / 2; ++i) {
      const ld ramp = std::clamp((i - low) / (high - low), ld(0), ld(1));
      const ld f = base_inv_freq(p.theta, i, dim);
      const ld want = f / 4 * ramp + f * (1 - ramp);
      kept += ramp == 0;
      divided += ramp == 1;
      EXPECT_LE(fp32_ulps(t.inv_freq[size_t(i)], want), 8) << i << " truncate " << truncate;
    }
    EXPECT_GT(kept, 0);
    EXPECT_GT(divided, 0);
  }
}

TEST(RopeTable, YarnAttentionFactorOptions) {
  RopeParams p;
  p.scaling = Scaling::kYarn;
  p.theta = 10000;
  p.factor = 40;
  p.original_max_position = 4096;
  p.attention_factor = 0.75;
  EXPECT_EQ(cpu::rope_table(p, 64).attention_factor, 0.75f);
  // DeepSeek's mscale / mscale_all_dim: the ratio of the two temperatures.
  p.attention_factor = 0;
  p.mscale = 0.707;
  p.mscale_all_dim = 1;
  const double want = (0.1 * 0.707 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1);
  EXPECT_NEAR(cpu::rope_table(p, 64).attention_factor, want, 1e-6);
  p.mscale_all_dim = 0;  // one of them unset: the default temperature
  EXPECT_NEAR(cpu::rope_table(p, 64).attention_factor, 0.1 * std::log(40.0) + 1, 1e-6);
  p.factor = 1;  // no stretch, no temperature
  EXPECT_EQ(cpu::rope_table(p, 64).attention_factor, 1.f);
}

TEST(RopeTable, BadParametersAreOneSentence) {
  RopeParams p;
  test::expect_throw<InputError>([&] { cpu::rope_table(p, 63); }, {"even head dim", "63"});
  p.theta = 0;
  test::expect_throw<InputError>([&] { cpu::rope_table(p, 64); }, {"theta"});
  p.theta = 10000;
  p.scaling = Scaling::kLinear;
  p.factor = 0;
  test::expect_throw<InputError>([&] { cpu::rope_table(p, 64); }, {"factor"});
  p.factor = 8;
  p.scaling = Scaling::kLlama3;
  test::expect_throw<InputError>([&] { cpu::rope_table(p, 64); }, {"original_max_position_embeddings"});
  p.original_max_position = 8192;
  p.high_freq_factor = p.low_freq_factor;
  test::expect_throw<InputError>([&] { cpu::rope_table(p, 64); }, {"high_freq_factor"});
  p.scaling = Scaling::kYarn;
  p.original_max_position = 0;
  test::expect_throw<InputError>([&] { cpu::rope_table(p, 64); }, {"yarn", "original_max_position_embeddings"});
}

// fp16 spacing at |x| (the subnormal spacing below the smallest normal).
double half_ulp(double x) {
  const double a = std::fabs(x);
  if (a < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, std::ilogb(a) - 10);
}

std::vector<uint16_t> random_halves(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = cpu::float_to_half(dist(rng));
  return v;
}

// The same steps in long double, written from the definitions: RMSNorm with transformers'
// two fp16 roundings, then each pair (x_i, x_{i+d/2}) multiplied as a complex number by
// attention_factor·e^{iθ}, θ = fp32(position · inv_freq_i).
std::vector<ld> independent_head(const uint16_t* x, int pos, int dim, const cpu::RopeTable& t, const uint16_t* w,
                                 float eps) {
  std::vector<ld> v(static_cast<size_t>(dim));
  for (int d = 0; d < dim; ++d) v[size_t(d)] = cpu::half_to_float(x[d]);
  if (w) {
    ld ss = 0;
    for (ld e : v) ss += e * e;
    const ld r = 1 / std::sqrt(ss / dim + eps);
    for (int d = 0; d < dim; ++d) {
      const float n = cpu::half_to_float(cpu::float_to_half(float(v[size_t(d)] * r)));
      v[size_t(d)] = cpu::half_to_float(cpu::float_to_half(n * cpu::half_to_float(w[d])));
    }
  }
  std::vector<ld> out(static_cast<size_t>(dim));
  const int half = dim / 2;
  for (int i = 0; i < half; ++i) {
    const ld angle = float(pos) * t.inv_freq[size_t(i)];
    const ld c = std::cos(angle) * t.attention_factor, s = std::sin(angle) * t.attention_factor;
    out[size_t(i)] = v[size_t(i)] * c - v[size_t(i + half)] * s;
    out[size_t(i + half)] = v[size_t(i + half)] * c + v[size_t(i)] * s;
  }
  return out;
}

TEST(RopeReference, MatchesAnIndependentEvaluationForEveryScalingAndShape) {
  std::mt19937 rng(26);
  struct Case {
    int heads, kv_heads, dim;
    bool norm;
    Scaling scaling;
  };
  const std::vector<Case> cases = {{4, 4, 64, false, Scaling::kNone},     {8, 1, 128, true, Scaling::kLlama3},
                                   {6, 2, 256, false, Scaling::kYarn},    {8, 8, 128, true, Scaling::kLinear},
                                   {16, 2, 128, false, Scaling::kLlama3}, {3, 3, 64, true, Scaling::kYarn}};
  for (const Case& c : cases) {
    RopeParams p;
    p.scaling = c.scaling;
    p.theta = c.scaling == Scaling::kLlama3 ? 500000 : 1000000;
    p.factor = c.scaling == Scaling::kLlama3 ? 8 : 4;
    p.original_max_position = 8192;
    const cpu::RopeTable t = cpu::rope_table(p, c.dim);
    const int64_t tokens = 37;
    const int64_t width = int64_t(c.heads + 2 * c.kv_heads) * c.dim;
    const auto qkv = random_halves(size_t(tokens * width), rng, 2.f);
    const auto qw = random_halves(size_t(c.dim), rng, 1.f), kw = random_halves(size_t(c.dim), rng, 1.f);
    std::vector<int> pos(static_cast<size_t>(tokens));
    std::uniform_int_distribution<int> pd(0, 131071);
    for (auto& x : pos) x = pd(rng);
    pos[0] = 0;
    std::vector<uint16_t> q(size_t(tokens * c.heads * c.dim)), k(size_t(tokens * c.kv_heads * c.dim)), v(k.size());
    const float eps = 1e-6f;
    cpu::rope_qkv(qkv.data(), pos.data(), tokens, c.heads, c.kv_heads, c.dim, t, c.norm ? qw.data() : nullptr,
                  c.norm ? kw.data() : nullptr, eps, q.data(), k.data(), v.data());
    int64_t checked = 0, over_one_ulp = 0;
    for (int64_t tok = 0; tok < tokens; ++tok) {
      for (int h = 0; h < c.heads + c.kv_heads; ++h) {
        const bool is_q = h < c.heads;
        const uint16_t* src = qkv.data() + tok * width + int64_t(h) * c.dim;
        const uint16_t* w = c.norm ? (is_q ? qw.data() : kw.data()) : nullptr;
        const auto want = independent_head(src, pos[size_t(tok)], c.dim, t, w, eps);
        const uint16_t* got =
            is_q ? q.data() + (tok * c.heads + h) * c.dim : k.data() + (tok * c.kv_heads + h - c.heads) * c.dim;
        for (int d = 0; d < c.dim; ++d) {
          const int partner = d < c.dim / 2 ? d + c.dim / 2 : d - c.dim / 2;
          const double g = cpu::half_to_float(got[d]);
          const double diff = std::fabs(g - double(want[size_t(d)]));
          // One rounding to fp16 (half an ulp) plus the fp32 cos/sin of the reference (2^-24 of
          // the pair's length); with the norm, a normed input rounded to the other side of a
          // tie (the two rsqrt differ in their last bits) moves by up to |w|·ulp(n) + ulp(n·w),
          // 2^-9 of the pair's length.
          const double pair = std::hypot(double(want[size_t(d)]), double(want[size_t(partner)]));
          const double bound = 0.5 * half_ulp(double(want[size_t(d)])) + (c.norm ? 0x1p-9 : 0x1p-22) * pair;
          ASSERT_LE(diff, bound) << g << " want " << double(want[size_t(d)]) << " partner "
                                 << double(want[size_t(partner)]) << " dim " << c.dim << " token " << tok << " head "
                                 << h << " d " << d;
          over_one_ulp += diff > half_ulp(double(want[size_t(d)]));
          ++checked;
        }
      }
      for (int h = 0; h < c.kv_heads; ++h) {
        for (int d = 0; d < c.dim; ++d) {
          ASSERT_EQ(v[size_t((tok * c.kv_heads + h) * c.dim + d)],
                    qkv[size_t(tok * width + int64_t(c.heads + c.kv_heads + h) * c.dim + d)]);
        }
      }
    }
    EXPECT_EQ(checked, tokens * (c.heads + c.kv_heads) * c.dim);
    EXPECT_LE(over_one_ulp, checked / 1000) << "dim " << c.dim;
  }
}

TEST(RopeReference, PositionZeroIsTheIdentityAndRotationKeepsLength) {
  std::mt19937 rng(7);
  const int dim = 128;
  const cpu::RopeTable t = cpu::rope_table(RopeParams{}, dim);
  const auto x = random_halves(dim, rng, 1.f);
  std::vector<uint16_t> out(dim);
  cpu::rope_head(x.data(), 0, dim, t, nullptr, 1e-6f, out.data());
  EXPECT_EQ(out, x);
  cpu::rope_head(x.data(), 100000, dim, t, nullptr, 1e-6f, out.data());
  double in2 = 0, out2 = 0;
  for (int d = 0; d < dim; ++d) {
    in2 += std::pow(cpu::half_to_float(x[size_t(d)]), 2);
    out2 += std::pow(cpu::half_to_float(out[size_t(d)]), 2);
  }
  EXPECT_NEAR(std::sqrt(out2 / in2), 1.0, 1e-3);
  EXPECT_NE(out, x);
}

TEST(RopeSpec, CanonicalFormsAndRefusals) {
  const Family& f = family_of("rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense");
  EXPECT_EQ(f.name(), "rope");
  EXPECT_EQ(f.canonical_spec("rope:kv_out=dense,qk_norm=1,dim=128,kv_heads=8,heads=32"),
            "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense");
  EXPECT_EQ(f.canonical_spec("rope:heads=32,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,page=16,kv=f16"),
            "rope:heads=32,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,page=16,kv=f16,kv_scale=none");
  EXPECT_EQ(f.canonical_spec("rope:heads=28,kv_heads=4,dim=128,qk_norm=0,kv_out=pages,page=16,kv=e4m3"),
            "rope:heads=28,kv_heads=4,dim=128,qk_norm=0,kv_out=pages,page=16,kv=e4m3,kv_scale=tensor");
  using test::expect_throw;
  expect_throw<InputError>([&] { f.canonical_spec("rope:heads=8,kv_heads=8,dim=127,qk_norm=0,kv_out=dense"); },
                           {"dim must be even"});
  expect_throw<InputError>([&] { f.canonical_spec("rope:heads=8,kv_heads=8,dim=128,qk_norm=0,kv_out=dense,page=16"); },
                           {"page"});
  expect_throw<InputError>([&] { f.canonical_spec("rope:heads=8,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,kv=f16"); },
                           {"page"});
  expect_throw<InputError>(
      [&] {
        f.canonical_spec("rope:heads=8,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,page=16,kv=f16,kv_scale=tensor");
      },
      {"kv=f16 takes kv_scale=none"});
  expect_throw<InputError>([&] { f.canonical_spec("rope:heads=8,kv_heads=8,dim=128,qk_norm=2,kv_out=dense"); },
                           {"qk_norm"});
  expect_throw<InputError>([&] { f.canonical_spec("rope:heads=8,kv_heads=8,dim=128,qk_norm=0,kv_out=cache"); },
                           {"kv_out"});
}

TEST(RopeConfig, DefaultsAndCandidatesAreValid) {
  for (const char* geo : {"heads=32,kv_heads=8,dim=128", "heads=4,kv_heads=1,dim=64", "heads=24,kv_heads=4,dim=256",
                          "heads=12,kv_heads=2,dim=96", "heads=2,kv_heads=2,dim=4", "heads=64,kv_heads=8,dim=512"}) {
    for (const char* out : {"qk_norm=0,kv_out=dense", "qk_norm=1,kv_out=pages,page=16,kv=e5m2,kv_scale=head"}) {
      const rope::Spec s = rope::Spec::parse(std::string("rope:") + geo + "," + out);
      for (int64_t m : {1, 7, 4096}) {
        const rope::Config c = rope::default_config(s, m);
        EXPECT_FALSE(c.invalid_reason(s)) << s.to_string();
        EXPECT_TRUE(rope::fits_bucket(s, c, m));
      }
      const auto candidates = rope::candidate_configs(s);
      EXPECT_FALSE(candidates.empty()) << s.to_string();
      for (const auto& c : candidates) EXPECT_FALSE(c.invalid_reason(s)) << s.to_string() << " " << c.to_string();
    }
  }
  // Llama/Qwen shapes: 16-byte pairs, 8 lanes a head, one token of 48 heads per CTA.
  const rope::Spec qwen = rope::Spec::parse("rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense");
  EXPECT_EQ(rope::default_config(qwen, 1).to_string(), "vec=8,threads=256,tokens=1");
  using test::expect_throw;
  expect_throw<InputError>([&] { rope::Config::parse(qwen, "vec=3,threads=128,tokens=1"); }, {"vec must be"});
  expect_throw<InputError>([&] { rope::Config::parse(qwen, "vec=1,threads=128,tokens=1"); }, {"lanes"});
  expect_throw<InputError>([&] { rope::Config::parse(qwen, "vec=8,threads=96,tokens=1"); }, {"power of two"});
  const rope::Spec wide = rope::Spec::parse("rope:heads=8,kv_heads=8,dim=512,qk_norm=0,kv_out=dense");
  expect_throw<InputError>([&] { rope::Config::parse(wide, "vec=8,threads=128,tokens=32"); }, {"shared memory"});
  const rope::Spec dim100 = rope::Spec::parse("rope:heads=12,kv_heads=2,dim=100,qk_norm=0,kv_out=dense");
  expect_throw<InputError>([&] { rope::Config::parse(dim100, "vec=8,threads=128,tokens=1"); }, {"does not divide"});
  const rope::Spec fp8 =
      rope::Spec::parse("rope:heads=2,kv_heads=2,dim=4,qk_norm=0,kv_out=pages,page=16,kv=e4m3,kv_scale=tensor");
  expect_throw<InputError>([&] { rope::Config::parse(fp8, "vec=1,threads=32,tokens=1"); }, {"at least 2"});
  expect_throw<InputError>(
      [&] { rope::Spec::parse("rope:heads=2,kv_heads=2,dim=6,qk_norm=0,kv_out=pages,page=16,kv=e4m3"); },
      {"multiple of 4"});
}

// sincospif after the double reduction keeps the kernel free of local memory (sincosf's
// large-argument path would not): no stack, no spills, for every output mode and head dim.
TEST(RopeStaticQuality, DefaultsCompileWithoutSpillsOrStackForSm70AndSm90) {
  std::vector<std::string> specs;
  // 16/4 heads (an 8B model's TP-2 shard): each fp8 code's division once spilled a register
  // around its slow-path call on sm_90 (kv_store now divides all before encoding any).
  for (const char* geo : {"heads=32,kv_heads=8,dim=128", "heads=16,kv_heads=2,dim=64", "heads=8,kv_heads=1,dim=256",
                          "heads=16,kv_heads=4,dim=128"}) {
    for (const char* out :
         {"qk_norm=0,kv_out=dense", "qk_norm=1,kv_out=dense", "qk_norm=1,kv_out=pages,page=16,kv=f16",
          "qk_norm=0,kv_out=pages,page=16,kv=e4m3", "qk_norm=1,kv_out=pages,page=16,kv=e5m2,kv_scale=head",
          "qk_norm=1,kv_out=pages,page=16,kv=e4m3,kv_scale=tensor"}) {
      specs.push_back(std::string("rope:") + geo + "," + out);
    }
  }
  for (Arch arch : {Arch{70}, Arch{90}}) {
    std::vector<CompileRequest> reqs;
    for (const auto& spec : specs) {
      const Family& f = family_of(spec);
      std::set<std::string> configs;
      for (int64_t m : {1, 4096}) configs.insert(f.default_config(spec, m, arch));
      for (const auto& c : configs) reqs.push_back(CompileRequest::make(f, spec, c, arch));
    }
    ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, true));
    const std::string spec = "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=pages,page=16,kv=e4m3";
    const Family& f = family_of(spec);
    const std::string ptx = compile_to_ptx(CompileRequest::make(f, spec, f.default_config(spec, 1, arch), arch),
                                           NvrtcRegistry::get().for_arch(arch));
    EXPECT_NE(ptx.find("ld.global.nc.v4.u32"), std::string::npos) << arch.name();
    EXPECT_EQ(ptx.find(".local"), std::string::npos) << arch.name();
  }
}

}  // namespace
}  // namespace onecat
