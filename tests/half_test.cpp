// fp16 conversions and the CPU rmsnorm reference, each against an independent
// implementation written here with double arithmetic.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/half.h"
#include "runtime/cpu/rmsnorm.h"

namespace onecat {
namespace {

using cpu::float_to_half;
using cpu::half_to_float;

// ---------------------------------------------------------------------------------------
// Reference binary16 built from the definition: value = (-1)^s × 2^(e-15) × 1.m, or
// (-1)^s × 2^-14 × 0.m for e = 0.

bool ref_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }

double ref_half_value(uint16_t h) {
  const int sign = h >> 15;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double mag;
  if (e == 0x1f) {
    mag = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    mag = std::ldexp(double(m), -24);
  } else {
    mag = std::ldexp(double(1024 + m), e - 25);
  }
  return sign ? -mag : mag;
}

// Round a double (any value, not only floats) to the nearest binary16, ties to even.
uint16_t ref_round_to_half(double v) {
  if (std::isnan(v)) return 0x7e00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  // 65520 = 65504 + half an ulp (32/2): the halfway point to the next (absent) value, where
  // ties-to-even goes up, to infinity.
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) {  // subnormal range: units of 2^-24
    const double q = std::nearbyint(std::ldexp(a, 24));
    return sign | uint16_t(q);  // q == 1024 is the smallest normal: the encoding carries
  }
  int e2;
  std::frexp(a, &e2);      // a = f × 2^e2, f in [0.5, 1)
  const int exp = e2 - 1;  // a in [2^exp, 2^(exp+1))
  const double q = std::nearbyint(std::ldexp(a, 10 - exp));  // in [1024, 2048]: 2048 carries
  return sign | uint16_t(((exp + 15) << 10) + (int(q) - 1024));
}

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

class HalfTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(std::fegetround(), FE_TONEAREST); }
};

TEST_F(HalfTest, ReferenceSelfCheck) {
  // The helpers above are the oracle: pin a few values by hand.
  EXPECT_EQ(ref_half_value(0x3c00), 1.0);
  EXPECT_EQ(ref_half_value(0xc000), -2.0);
  EXPECT_EQ(ref_half_value(0x7bff), 65504.0);
  EXPECT_EQ(ref_half_value(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(ref_half_value(0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(ref_half_value(0x3555), 0.333251953125);
  EXPECT_EQ(ref_round_to_half(1.0), 0x3c00);
  EXPECT_EQ(ref_round_to_half(0.1), 0x2e66);
  EXPECT_EQ(ref_round_to_half(-0.0), 0x8000);
}

TEST_F(HalfTest, EveryHalfConvertsToItsExactValueAndBack) {
  int nans = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = uint16_t(i);
    const float f = half_to_float(h);
    if (ref_is_nan(h)) {
      ++nans;
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      const uint16_t back = float_to_half(f);
      EXPECT_TRUE(ref_is_nan(back)) << std::hex << i << " → " << back;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << "NaN keeps its sign";
      continue;
    }
    ASSERT_EQ(double(f), ref_half_value(h)) << std::hex << i;
    EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    ASSERT_EQ(float_to_half(f), h) << std::hex << i;
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST_F(HalfTest, HalfwayPointsRoundToEven) {
  // Between every pair of adjacent finite halves of one sign: the midpoint (exact in float)
  // goes to the one with an even mantissa, and one float ulp either side goes to the nearer.
  for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
    for (uint32_t lo = 0; lo < 0x7bff; ++lo) {
      const uint16_t a = uint16_t(sign | lo), b = uint16_t(sign | (lo + 1));
      const double mid = (ref_half_value(a) + ref_half_value(b)) / 2;
      const float fmid = float(mid);
      ASSERT_EQ(double(fmid), mid) << "midpoint must be exact in float";
      const uint16_t even = (a & 1) ? b : a;
      ASSERT_EQ(float_to_half(fmid), even) << std::hex << a << "/" << b;
      const float toward_a = std::nextafter(fmid, float(ref_half_value(a)));
      const float toward_b = std::nextafter(fmid, float(ref_half_value(b)));
      ASSERT_EQ(float_to_half(toward_a), a) << std::hex << a;
      ASSERT_EQ(float_to_half(toward_b), b) << std::hex << b;
    }
  }
  // A few by hand: 1 + 2^-11 is halfway between 1 and 1+2^-10 → 1 (even);
  // 1 + 3×2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 → 1+2^-9.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half(2049.0f), 0x6800);  // 2048 and 2050 are halves; 2048 is even
  EXPECT_EQ(float_to_half(2051.0f), 0x6802);  // halfway 2050/2052 → 2052
}

TEST_F(HalfTest, OverflowGoesToInfinity) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(-65519.0f), 0xfbff);
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(ref_is_nan(float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(ref_is_nan(float_to_half(bits_to_float(0x7f800001))));  // signalling NaN, low payload
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isinf(half_to_float(0xfc00)) && half_to_float(0xfc00) < 0);
}

TEST_F(HalfTest, SubnormalsAndZeros) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal half
  EXPECT_EQ(float_to_half(tiny), 0x0001);
  EXPECT_EQ(float_to_half(-tiny), 0x8001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // halfway to 0: even is 0
  EXPECT_EQ(float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(1.5f * tiny), 0x0002);  // halfway 1/2 → 2 (even)
  EXPECT_EQ(float_to_half(2.5f * tiny), 0x0002);  // halfway 2/3 → 2 (even)
  EXPECT_EQ(float_to_half(1023 * tiny), 0x03ff);  // largest subnormal
  EXPECT_EQ(float_to_half(1023.5f * tiny), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(half_to_float(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(half_to_float(0x0001), tiny);
  EXPECT_EQ(half_to_float(0x03ff), 1023 * tiny);
}

TEST_F(HalfTest, RandomFloatsMatchTheReference) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> bits;
  // Uniform bit patterns mostly land outside half's range; also draw exponents near it.
  std::uniform_int_distribution<int> exp_near(127 - 26, 127 + 16);
  for (int i = 0; i < 400000; ++i) {
    uint32_t b = bits(rng);
    if (i % 2) b = (b & 0x807fffffu) | (uint32_t(exp_near(rng)) << 23);
    const float f = bits_to_float(b);
    const uint16_t got = float_to_half(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(ref_is_nan(got)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(got, ref_round_to_half(double(f))) << "float bits 0x" << std::hex << b << " = " << f;
  }
}

// ---------------------------------------------------------------------------------------
// rmsnorm reference

// ulp of binary16 at |v| (2^-24 in the subnormal range).
double half_ulp(double v) {
  const double a = std::fabs(v);
  if (a < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
  int e2;
  std::frexp(a, &e2);
  return std::ldexp(1.0, e2 - 1 - 10);
}

struct RmsCase {
  int64_t rows, hidden;
  bool residual;
};

class RmsnormReference : public ::testing::TestWithParam<RmsCase> {};

TEST_P(RmsnormReference, MatchesAStraightforwardComputation) {
  const auto [rows, hidden, with_residual] = GetParam();
  const size_t n = size_t(rows * hidden);
  std::mt19937 rng(uint32_t(rows * 1000 + hidden * 2 + with_residual));
  std::normal_distribution<double> normal(0.0, 1.5);
  std::uniform_real_distribution<double> wdist(-1.5, 1.5);
  std::vector<uint16_t> x(n), res(n), w(static_cast<size_t>(hidden)), out(n, 0xffff);
  for (auto& v : x) v = ref_round_to_half(normal(rng));
  for (auto& v : res) v = ref_round_to_half(normal(rng) * 4);
  for (auto& v : w) v = ref_round_to_half(wdist(rng));
  if (rows > 1) {  // one row of zeros: out must be 0, not NaN
    for (int64_t i = 0; i < hidden; ++i) x[size_t(hidden + i)] = 0, res[size_t(hidden + i)] = 0x8000;
  }
  const std::vector<uint16_t> res_before = res;
  const float eps = 1e-6f;

  cpu::rmsnorm(out.data(), x.data(), with_residual ? res.data() : nullptr, w.data(), eps, rows, hidden);

  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> s(static_cast<size_t>(hidden));
    double sum_sq = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      const size_t k = size_t(r * hidden + i);
      double v = ref_half_value(x[k]);
      if (with_residual) {
        // The sum of two halves is exact in double; round it once to fp16.
        const uint16_t sum = ref_round_to_half(v + ref_half_value(res_before[k]));
        ASSERT_EQ(res[k], sum) << "residual not updated to fp16(x + residual) at row " << r << " col " << i;
        v = ref_half_value(sum);
      }
      s[size_t(i)] = v;
      sum_sq += v * v;
    }
    const double rms = std::sqrt(sum_sq / double(hidden) + double(eps));
    for (int64_t i = 0; i < hidden; ++i) {
      const size_t k = size_t(r * hidden + i);
      const double expect = s[size_t(i)] / rms * ref_half_value(w[size_t(i)]);
      const double got = ref_half_value(out[k]);
      ASSERT_FALSE(std::isnan(got)) << "row " << r << " col " << i;
      // Correctly rounded, give or take the fp32 intermediate the reference documents.
      ASSERT_LE(std::fabs(got - expect), 0.5 * half_ulp(expect) + 1e-6 * std::fabs(expect))
          << "row " << r << " col " << i << ": got " << got << ", expected " << expect;
    }
  }
  if (!with_residual) {
    EXPECT_EQ(res, res_before) << "residual untouched when not fused";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsnormReference,
                         ::testing::Values(RmsCase{1, 1, false}, RmsCase{1, 1, true}, RmsCase{3, 7, false},
                                           RmsCase{3, 7, true}, RmsCase{5, 4096, false}, RmsCase{5, 4096, true},
                                           RmsCase{2, 5120, true}, RmsCase{2, 65536, true}),
                         [](const ::testing::TestParamInfo<RmsCase>& info) {
                           return "rows" + std::to_string(info.param.rows) + "_hidden" + std::to_string(info.param.hidden) +
                                  (info.param.residual ? "_residual" : "_plain");
                         });

TEST(RmsnormReferenceFixed, HandComputedRow) {
  // x = [3, 4] → mean(x^2) = 12.5, rms = sqrt(12.5) = 3.5355…; weight = [1, 2].
  const uint16_t x[2] = {float_to_half(3.0f), float_to_half(4.0f)};
  const uint16_t w[2] = {float_to_half(1.0f), float_to_half(2.0f)};
  uint16_t out[2];
  cpu::rmsnorm(out, x, nullptr, w, 0.0f, 1, 2);
  EXPECT_EQ(out[0], float_to_half(float(3.0 / std::sqrt(12.5))));
  EXPECT_EQ(out[1], float_to_half(float(8.0 / std::sqrt(12.5))));
  // With a residual: s = x + r = [1, 1] → rms 1, out = weight, residual ← [1, 1].
  const uint16_t x2[2] = {float_to_half(0.5f), float_to_half(2.0f)};
  uint16_t r2[2] = {float_to_half(0.5f), float_to_half(-1.0f)};
  cpu::rmsnorm(out, x2, r2, w, 0.0f, 1, 2);
  EXPECT_EQ(r2[0], 0x3c00);
  EXPECT_EQ(r2[1], 0x3c00);
  EXPECT_EQ(out[0], 0x3c00);
  EXPECT_EQ(out[1], 0x4000);
}

}  // namespace
}  // namespace onecat
