// Weight formats of the gemm family: the E4M3/E2M1 codecs, every packer (checkpoint layout →
// kernel layout) and the CPU gemm reference. Each packed weight is checked through
// cpu::dequantize against a decoding written here straight from the checkpoint layouts of
// docs/gemm.md, so a packer and its reader cannot share a mistake.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/e2m1.h"
#include "base/e4m3.h"
#include "base/error.h"
#include "base/half.h"
#include "codegen/weight_format.h"
#include "models/quant/pack.h"
#include "runtime/cpu/gemm.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using cpu::float_to_half;
using cpu::half_to_float;
using quant::PackedWeight;
using quant::WeightFormat;
using test::expect_throw;

// ---------------------------------------------------------------------------------------
// Independent decoders, from the format definitions.

double ref_e4m3(uint8_t b) {
  const int e = (b >> 3) & 0xF, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? m / 512.0 : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return (b & 0x80) ? -mag : mag;
}

double ref_e2m1(unsigned c) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8) ? -kMag[c & 7] : kMag[c & 7];
}

// Fresh data every run; the seed is printed on failure and ONECAT_TEST_SEED replays it.
uint64_t fresh_seed() {
  if (const char* s = std::getenv("ONECAT_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
}

struct Rng {
  explicit Rng(uint64_t seed) : gen(seed) {}
  std::mt19937_64 gen;
  uint32_t u32() { return uint32_t(gen()); }
  int32_t i32() { return int32_t(u32()); }
  uint8_t u8() { return uint8_t(gen()); }
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  uint16_t half(double lo, double hi) { return float_to_half(float(uniform(lo, hi))); }
  uint8_t e4m3_finite() {
    for (;;) {
      uint8_t b = u8();
      if ((b & 0x7F) != 0x7F) return b;
    }
  }
};

#define SEEDED(seed) SCOPED_TRACE("ONECAT_TEST_SEED=" + std::to_string(seed))

// Compares got[N][K] with ref(n, k) exactly (NaN equals NaN); reports the first mismatch.
void expect_matrix(const std::vector<float>& got, int64_t n, int64_t k,
                   const std::function<double(int64_t, int64_t)>& ref) {
  ASSERT_EQ(got.size(), size_t(n * k));
  int64_t bad = 0;
  std::string first;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const float want = float(ref(r, c));
      const float have = got[size_t(r * k + c)];
      if (!(have == want || (std::isnan(have) && std::isnan(want)))) {
        if (bad++ == 0) {
          first = "W[" + std::to_string(r) + "][" + std::to_string(c) + "] = " + std::to_string(have) + ", expected " +
                  std::to_string(want);
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << bad << " mismatches; first " << first;
}

std::vector<uint16_t> random_x(Rng& rng, int64_t m, int64_t k) {
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = rng.half(-2, 2);
  return x;
}

// y[m][n] = Σ_k x[m][k] W[n][k] with a naive triple loop.
std::vector<double> naive_product(const std::vector<uint16_t>& x, int64_t m, int64_t k, int64_t n,
                                  const std::function<double(int64_t, int64_t)>& w) {
  std::vector<double> y(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < k; ++kk) y[size_t(i * n + j)] += half_to_float(x[size_t(i * k + kk)]) * w(j, kk);
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::fabs(want[i]))) << "at " << i;
  }
}

// ---------------------------------------------------------------------------------------
// Names and codecs

TEST(QuantFormat, NamesRoundTrip) {
  for (const char* name : {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    EXPECT_EQ(quant::format_name(quant::parse_weight_format(name)), name);
  }
  EXPECT_EQ(quant::parse_weight_format("fp8b128"), WeightFormat::kFp8B128);
  expect_throw<InputError>([] { quant::parse_weight_format("int4"); },
                           {"'int4'", "f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"});
}

TEST(QuantE4m3, DecodesEveryCode) {
  for (int b = 0; b < 256; ++b) {
    const double want = ref_e4m3(uint8_t(b));
    const float got = quant::e4m3_to_float(uint8_t(b));
    EXPECT_EQ(quant::e4m3_is_nan(uint8_t(b)), std::isnan(want)) << b;
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(double(got), want) << b;
      EXPECT_EQ(std::signbit(got), bool(b & 0x80)) << b;
    }
  }
  EXPECT_EQ(quant::e4m3_to_float(0x7E), 448.f);
  EXPECT_EQ(quant::e4m3_to_float(0x01), std::ldexp(1.f, -9));
}

// The nearest finite E4M3 code by search, ties to the even mantissa; NaN above 464.
uint8_t ref_encode_e4m3(double v) {
  if (std::isnan(v) || std::fabs(v) > 464) return std::signbit(v) ? 0xFF : 0x7F;
  int best = -1;
  double best_d = 0;
  for (int b = 0; b < 128; ++b) {
    if (b == 0x7F) continue;
    const double d = std::fabs(std::fabs(v) - ref_e4m3(uint8_t(b)));
    if (best < 0 || d < best_d || (d == best_d && (b & 1) == 0)) {
      best = b;
      best_d = d;
    }
  }
  return uint8_t(best | (std::signbit(v) ? 0x80 : 0));
}

TEST(QuantE4m3, EncodesToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    if (quant::e4m3_is_nan(uint8_t(b))) continue;
    EXPECT_EQ(quant::float_to_e4m3(quant::e4m3_to_float(uint8_t(b))), b);
  }
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (int i = 0; i < 20000; ++i) {
    const float v = float(std::ldexp(rng.uniform(-1, 1), rng.uniform_int(-12, 10)));
    ASSERT_EQ(quant::float_to_e4m3(v), ref_encode_e4m3(v)) << v;
  }
  // Exact midpoints between neighbours go to the even mantissa.
  for (int b = 0; b < 0x7E; ++b) {
    const double mid = (ref_e4m3(uint8_t(b)) + ref_e4m3(uint8_t(b + 1))) / 2;
    EXPECT_EQ(quant::float_to_e4m3(float(mid)), (b & 1) ? b + 1 : b) << mid;
  }
  EXPECT_EQ(quant::float_to_e4m3(464.f), 0x7E);
  EXPECT_EQ(quant::float_to_e4m3(465.f), 0x7F);
  EXPECT_EQ(quant::float_to_e4m3(-1e9f), 0xFF);
  EXPECT_EQ(quant::float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
}

TEST(QuantE2m1, DecodesAndEncodes) {
  for (unsigned c = 0; c < 16; ++c) {
    EXPECT_EQ(double(quant::e2m1_to_float(uint8_t(c))), ref_e2m1(c)) << c;
    EXPECT_EQ(quant::float_to_e2m1(quant::e2m1_to_float(uint8_t(c))), c);
  }
  // Midpoints: ties to the even code; beyond 6 saturates.
  EXPECT_EQ(quant::float_to_e2m1(0.25f), 0);
  EXPECT_EQ(quant::float_to_e2m1(0.75f), 2);
  EXPECT_EQ(quant::float_to_e2m1(1.25f), 2);
  EXPECT_EQ(quant::float_to_e2m1(1.75f), 4);
  EXPECT_EQ(quant::float_to_e2m1(2.5f), 4);
  EXPECT_EQ(quant::float_to_e2m1(3.5f), 6);
  EXPECT_EQ(quant::float_to_e2m1(5.f), 6);
  EXPECT_EQ(quant::float_to_e2m1(5.01f), 7);
  EXPECT_EQ(quant::float_to_e2m1(-100.f), 15);
  EXPECT_EQ(quant::float_to_e2m1(-0.3f), 9);
}

// ---------------------------------------------------------------------------------------
// Packers, each against the checkpoint layout

TEST(QuantPack, F16) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  const int64_t n = 2567, k = 136;
  std::vector<uint16_t> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = uint16_t(rng.u32() & 0xFBFF);  // exponent never 31: finite
  const PackedWeight p = quant::pack_f16(n, k, w);
  EXPECT_EQ(p.format, WeightFormat::kF16);
  EXPECT_EQ(p.bytes(), size_t(n * k * 2));
  expect_matrix(cpu::dequantize(p), n, k, [&](int64_t r, int64_t c) { return half_to_float(w[size_t(r * k + c)]); });
}

TEST(QuantPack, Awq4) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (int group : {32, 64, 128}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{2568, 256}, {264, 1024}, {8, 128}}) {
      if (k % group) continue;
      SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k) + " G=" + std::to_string(group));
      const int64_t groups = k / group;
      std::vector<int32_t> qweight(static_cast<size_t>(k * n / 8)), qzeros(static_cast<size_t>(groups * n / 8));
      std::vector<uint16_t> scales(static_cast<size_t>(groups * n));
      for (auto& v : qweight) v = rng.i32();
      for (auto& v : qzeros) v = rng.i32();
      for (auto& v : scales) v = rng.half(1e-3, 0.05);
      const PackedWeight p = quant::pack_awq4(n, k, group, qweight, qzeros, scales);
      EXPECT_EQ(p.group, group);
      EXPECT_TRUE(p.perm.empty());
      EXPECT_EQ(p.bytes(), size_t(n * k / 2 + 4 * n * groups));
      // AutoAWQ unpacking: column 8j + c sits at nibble AWQ_REVERSE_ORDER[c].
      static const int kReverse[8] = {0, 4, 1, 5, 2, 6, 3, 7};
      auto field = [&](const std::vector<int32_t>& t, int64_t row, int64_t col) {
        return (uint32_t(t[size_t(row * (n / 8) + col / 8)]) >> (4 * kReverse[col % 8])) & 0xF;
      };
      expect_matrix(cpu::dequantize(p), n, k, [&](int64_t r, int64_t c) {
        const int64_t g = c / group;
        return (double(field(qweight, c, r)) - field(qzeros, g, r)) * half_to_float(scales[size_t(g * n + r)]);
      });
    }
  }
}

struct GptqCheckpoint {
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales;
};

// desc_act: GPTQ quantises columns in a permuted order, so g_idx[order[i]] = i / G.
GptqCheckpoint random_gptq(Rng& rng, int64_t n, int64_t k, int group, bool act_order, bool with_zeros) {
  GptqCheckpoint ck;
  const int64_t groups = k / group;
  ck.qweight.resize(size_t(k / 8 * n));
  for (auto& v : ck.qweight) v = rng.i32();
  if (with_zeros) {
    ck.qzeros.resize(size_t(groups * n / 8));
    for (auto& v : ck.qzeros) v = rng.i32();
  }
  ck.scales.resize(size_t(groups * n));
  for (auto& v : ck.scales) v = rng.half(1e-3, 0.05);
  ck.g_idx.resize(size_t(k));
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  if (act_order) std::shuffle(order.begin(), order.end(), rng.gen);
  for (int64_t i = 0; i < k; ++i) ck.g_idx[size_t(order[size_t(i)])] = int32_t(i / group);
  return ck;
}

// W[n][k] in the original column order, from the AutoGPTQ v1 layout.
double gptq_ref(const GptqCheckpoint& ck, int64_t n, int64_t r, int64_t c) {
  const int32_t g = ck.g_idx[size_t(c)];
  const uint32_t q = (uint32_t(ck.qweight[size_t((c / 8) * n + r)]) >> (4 * (c % 8))) & 0xF;
  const uint32_t z =
      ck.qzeros.empty() ? 8 : ((uint32_t(ck.qzeros[size_t(g * (n / 8) + r / 8)]) >> (4 * (r % 8))) & 0xF) + 1;
  return (double(q) - double(z)) * half_to_float(ck.scales[size_t(g * n + r)]);
}

TEST(QuantPack, Gptq4WithoutActOrder) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (int group : {64, 128}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{2568, 256}, {136, 1024}}) {
      SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k) + " G=" + std::to_string(group));
      GptqCheckpoint ck = random_gptq(rng, n, k, group, false, true);
      // g_idx = k/G and no g_idx mean the same.
      const PackedWeight with = quant::pack_gptq4(n, k, group, ck.qweight, ck.qzeros, ck.scales, ck.g_idx);
      const PackedWeight without = quant::pack_gptq4(n, k, group, ck.qweight, ck.qzeros, ck.scales, {});
      EXPECT_TRUE(with.perm.empty());
      EXPECT_TRUE(without.perm.empty());
      EXPECT_EQ(with.qweight, without.qweight);
      EXPECT_EQ(with.zeros, without.zeros);
      expect_matrix(cpu::dequantize(with), n, k, [&](int64_t r, int64_t c) { return gptq_ref(ck, n, r, c); });
    }
  }
}

TEST(QuantPack, Gptq4SymmetricWithoutZerosAllowsOddN) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  const int64_t n = 2567, k = 256;
  GptqCheckpoint ck = random_gptq(rng, n, k, 128, false, false);
  const PackedWeight p = quant::pack_gptq4(n, k, 128, ck.qweight, {}, ck.scales, {});
  expect_matrix(cpu::dequantize(p), n, k, [&](int64_t r, int64_t c) { return gptq_ref(ck, n, r, c); });
}

TEST(QuantPack, Gptq4ActOrderSortsColumnsAndGemmMatchesDense) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (int group : {64, 128}) {
    const int64_t n = 264, k = 512, m = 3;
    SCOPED_TRACE("G=" + std::to_string(group));
    GptqCheckpoint ck = random_gptq(rng, n, k, group, true, true);
    const PackedWeight p = quant::pack_gptq4(n, k, group, ck.qweight, ck.qzeros, ck.scales, ck.g_idx);
    ASSERT_EQ(p.perm.size(), size_t(k));
    // A stable sort by g_idx: packed column k' is in group k'/G, original order within a group.
    std::vector<bool> seen(static_cast<size_t>(k), false);
    for (int64_t kp = 0; kp < k; ++kp) {
      const int32_t src = p.perm[size_t(kp)];
      ASSERT_TRUE(src >= 0 && src < k && !seen[size_t(src)]);
      seen[size_t(src)] = true;
      EXPECT_EQ(ck.g_idx[size_t(src)], kp / group);
      if (kp % group) {
        EXPECT_LT(p.perm[size_t(kp - 1)], src);
      }
    }
    expect_matrix(cpu::dequantize(p), n, k,
                  [&](int64_t r, int64_t c) { return gptq_ref(ck, n, r, p.perm[size_t(c)]); });

    const std::vector<uint16_t> x = random_x(rng, m, k);
    std::vector<float> y(static_cast<size_t>(m * n));
    cpu::gemm(p, x.data(), m, {}, y.data());
    expect_close(y, naive_product(x, m, k, n, [&](int64_t r, int64_t c) { return gptq_ref(ck, n, r, c); }));
  }
}

TEST(QuantPack, Fp8b32FromUe8m0AndFromFp32) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2567, 256}, {33, 1024}, {32, 32}}) {
    SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k));
    const int64_t rb = (n + 31) / 32, cb = k / 32;
    std::vector<uint8_t> w(static_cast<size_t>(n * k)), ue8m0(static_cast<size_t>(rb * cb));
    std::vector<float> f32(ue8m0.size());
    for (auto& v : w) v = rng.e4m3_finite();
    for (size_t i = 0; i < ue8m0.size(); ++i) {
      const int e = rng.uniform_int(-14, 7);
      ue8m0[i] = uint8_t(127 + e);
      f32[i] = std::ldexp(1.f, e);
    }
    auto ref = [&](int64_t r, int64_t c) {
      return ref_e4m3(w[size_t(r * k + c)]) * std::pow(2.0, int(ue8m0[size_t((r / 32) * cb + c / 32)]) - 127);
    };
    const PackedWeight a = quant::pack_fp8b32(n, k, w, ue8m0);
    const PackedWeight b = quant::pack_fp8b32(n, k, w, std::span<const float>(f32));
    EXPECT_EQ(a.group, 32);
    EXPECT_EQ(a.scales, b.scales);
    EXPECT_EQ(a.bytes(), size_t(n * k + rb * cb));
    const std::vector<float> d = cpu::dequantize(a);
    expect_matrix(d, n, k, ref);
    // Every value is exact in fp16 (VOLTA.md, "Formats and exactness").
    for (float v : d) ASSERT_EQ(half_to_float(float_to_half(v)), v);
  }
}

TEST(QuantPack, Fp8b128BlockAndPerChannel) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2567, 1000}, {128, 256}, {3, 7}}) {
    SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k));
    std::vector<uint8_t> w(static_cast<size_t>(n * k));
    for (auto& v : w) v = rng.e4m3_finite();
    const int64_t rb = (n + 127) / 128, cb = (k + 127) / 128;  // a partial last block is allowed
    std::vector<float> block(static_cast<size_t>(rb * cb)), channel(static_cast<size_t>(n));
    for (auto& v : block) v = float(rng.uniform(1e-5, 1e-2));
    for (auto& v : channel) v = float(rng.uniform(1e-5, 1e-2));
    const PackedWeight pb = quant::pack_fp8b128(n, k, w, block, quant::Fp8Scales::kBlock128);
    const PackedWeight pc = quant::pack_fp8b128(n, k, w, channel, quant::Fp8Scales::kPerChannel);
    EXPECT_EQ(pb.group, 128);
    EXPECT_EQ(pc.group, 0);
    expect_matrix(cpu::dequantize(pb), n, k, [&](int64_t r, int64_t c) {
      return ref_e4m3(w[size_t(r * k + c)]) * double(block[size_t((r / 128) * cb + c / 128)]);
    });
    expect_matrix(cpu::dequantize(pc), n, k,
                  [&](int64_t r, int64_t c) { return ref_e4m3(w[size_t(r * k + c)]) * double(channel[size_t(r)]); });
  }
}

TEST(QuantPack, Nvfp4) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2567, 512}, {5, 16}, {64, 2048}}) {
    SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k));
    std::vector<uint8_t> w(static_cast<size_t>(n * k / 2)), s(static_cast<size_t>(n * k / 16));
    for (auto& v : w) v = rng.u8();
    for (auto& v : s) v = rng.e4m3_finite();
    const float global = float(rng.uniform(1e-4, 1e-2));
    const PackedWeight p = quant::pack_nvfp4(n, k, w, s, global);
    EXPECT_EQ(p.global_scale, global);
    EXPECT_EQ(p.bytes(), size_t(n * k / 2 + n * k / 16));
    expect_matrix(cpu::dequantize(p), n, k, [&](int64_t r, int64_t c) {
      const uint8_t byte = w[size_t(r * (k / 2) + c / 2)];
      const unsigned code = (c % 2) ? byte >> 4 : byte & 0xF;
      return ref_e2m1(code) * ref_e4m3(s[size_t(r * (k / 16) + c / 16)]) * double(global);
    });
  }
}

TEST(QuantPack, Mxfp4) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2567, 1024}, {7, 32}}) {
    SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k));
    std::vector<uint8_t> blocks(static_cast<size_t>(n * k / 2)), scales(static_cast<size_t>(n * k / 32));
    for (auto& v : blocks) v = rng.u8();
    for (auto& v : scales) v = uint8_t(rng.uniform_int(0, quant::kMxfp4MaxScaleByte));
    const PackedWeight p = quant::pack_mxfp4(n, k, blocks, scales);
    EXPECT_EQ(p.group, 32);
    expect_matrix(cpu::dequantize(p), n, k, [&](int64_t r, int64_t c) {
      const uint8_t byte = blocks[size_t(r * (k / 2) + c / 2)];
      const unsigned code = (c % 2) ? byte >> 4 : byte & 0xF;
      return ref_e2m1(code) * std::pow(2.0, int(scales[size_t(r * (k / 32) + c / 32)]) - 127);
    });
  }
}

// The kernel layout itself (docs/gemm.md): one word holds k = 8w + {0,2,4,6,1,3,5,7}[p] at
// bits 4p, so codes of k = 2i and 2i+1 sit at bits 4i and 16 + 4i.
TEST(QuantPack, NibbleOrderOfKernelWords) {
  std::vector<uint8_t> blocks(4);  // one row, K = 8: codes 1..8 for k = 0..7
  for (int kk = 0; kk < 8; ++kk) blocks[size_t(kk / 2)] |= uint8_t((kk + 1) << (4 * (kk % 2)));
  std::vector<uint8_t> padded(16), padded_scales(1, 127);
  std::copy(blocks.begin(), blocks.end(), padded.begin());
  const PackedWeight p = quant::pack_mxfp4(1, 32, padded, padded_scales);
  const uint32_t word = uint32_t(p.qweight[0]) | uint32_t(p.qweight[1]) << 8 | uint32_t(p.qweight[2]) << 16 |
                        uint32_t(p.qweight[3]) << 24;
  EXPECT_EQ(word, 0x86427531u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((word >> (4 * i)) & 0x000f000fu, uint32_t(2 * i + 1) | uint32_t(2 * i + 2) << 16);
  }
}

// ---------------------------------------------------------------------------------------
// Refusals: every one is an InputError that names the tensor, the place and the rule.

TEST(QuantPack, RefusesFp8b32ScalesOutsideTheExactWindow) {
  const int64_t n = 40, k = 64;  // blocks [2][2]
  std::vector<uint8_t> w(static_cast<size_t>(n * k), 0x38);
  std::vector<uint8_t> ue8m0(4, 127);
  ue8m0[3] = 127 + 8;
  expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, ue8m0); },
                           {"fp8b32", "block [1][1]", "rows 32..39", "columns 32..63", "2^8", "[-14, 7]"});
  ue8m0[3] = 127 - 15;
  expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, ue8m0); }, {"block [1][1]", "2^-15"});
  ue8m0[3] = 255;
  expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, ue8m0); }, {"block [1][1]", "NaN"});

  std::vector<float> f32(4, 1.f);
  for (float bad :
       {0.3f, -0.5f, 0.f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    f32[2] = bad;
    expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, std::span<const float>(f32)); },
                             {"block [1][0]", "not a power of two"});
  }
  f32[2] = 256.f;
  expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, std::span<const float>(f32)); },
                           {"block [1][0]", "2^8", "[-14, 7]"});
  f32[2] = std::ldexp(1.f, -15);
  expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, std::span<const float>(f32)); }, {"2^-15"});
  f32[2] = std::ldexp(1.f, -14);  // the edges of the window are fine
  f32[1] = 128.f;
  EXPECT_NO_THROW(quant::pack_fp8b32(n, k, w, std::span<const float>(f32)));
}

TEST(QuantPack, RefusesE4m3NanCodes) {
  const int64_t n = 40, k = 64;
  std::vector<uint8_t> w(static_cast<size_t>(n * k), 0x38);
  for (uint8_t nan : {uint8_t(0x7F), uint8_t(0xFF)}) {
    w[size_t(33 * k + 5)] = nan;
    std::vector<uint8_t> ue8m0(4, 127);
    expect_throw<InputError>([&] { quant::pack_fp8b32(n, k, w, ue8m0); }, {"fp8b32", "weight[33][5]", "NaN"});
    std::vector<float> block(1, 1.f);
    expect_throw<InputError>([&] { quant::pack_fp8b128(n, k, w, block, quant::Fp8Scales::kBlock128); },
                             {"fp8b128", "weight[33][5]", "NaN"});

    std::vector<uint8_t> fp4(static_cast<size_t>(n * k / 2)), s(static_cast<size_t>(n * k / 16), 0x38);
    s[size_t(7 * (k / 16) + 2)] = nan;
    expect_throw<InputError>([&] { quant::pack_nvfp4(n, k, fp4, s, 1.f); }, {"nvfp4", "weight_scale[7][2]", "NaN"});
  }
  std::vector<uint8_t> w_ok(static_cast<size_t>(n * k), 0x38), fp4(static_cast<size_t>(n * k / 2)),
      s(static_cast<size_t>(n * k / 16), 0x38);
  std::vector<float> bad_scale(1, std::numeric_limits<float>::infinity());
  expect_throw<InputError>([&] { quant::pack_fp8b128(n, k, w_ok, bad_scale, quant::Fp8Scales::kBlock128); },
                           {"weight_scale_inv", "finite"});
  expect_throw<InputError>([&] { quant::pack_nvfp4(n, k, fp4, s, std::numeric_limits<float>::quiet_NaN()); },
                           {"weight_scale_2", "finite"});
}

TEST(QuantPack, RefusesMxfp4NanScale) {
  const int64_t n = 3, k = 64;
  std::vector<uint8_t> blocks(static_cast<size_t>(n * k / 2)), scales(static_cast<size_t>(n * k / 32), 127);
  scales[5] = 255;
  expect_throw<InputError>([&] { quant::pack_mxfp4(n, k, blocks, scales); }, {"mxfp4", "scales[2][1]", "255"});
  // Weights past fp16's range: 6 · 2^14 > 65504.
  scales[5] = 141;
  expect_throw<InputError>([&] { quant::pack_mxfp4(n, k, blocks, scales); }, {"mxfp4", "scales[2][1]", "141", "65504"});
  scales[5] = quant::kMxfp4MaxScaleByte;
  EXPECT_EQ(quant::pack_mxfp4(n, k, blocks, scales).scales[5], quant::kMxfp4MaxScaleByte);
}

TEST(QuantPack, RefusesBadShapes) {
  std::vector<int32_t> i32(1 << 16);
  std::vector<uint16_t> u16(1 << 16);
  std::vector<uint8_t> u8(1 << 16);
  std::vector<float> f32(1 << 10);
  auto i32s = [&](size_t len) { return std::span<const int32_t>(i32.data(), len); };
  auto u16s = [&](size_t len) { return std::span<const uint16_t>(u16.data(), len); };
  auto u8s = [&](size_t len) { return std::span<const uint8_t>(u8.data(), len); };
  auto f32s = [&](size_t len) { return std::span<const float>(f32.data(), len); };

  expect_throw<InputError>([&] { quant::pack_f16(0, 8, u16s(0)); }, {"f16", "N = 0"});
  expect_throw<InputError>([&] { quant::pack_f16(4, 8, u16s(31)); }, {"weight", "[N][K]", "[4][8]", "31 elements"});

  // awq4: N = 64, K = 256, G = 128 → qweight [256][8], qzeros [2][8], scales [2][64].
  expect_throw<InputError>([&] { quant::pack_awq4(64, 256, 16, i32s(2048), i32s(16), u16s(128)); },
                           {"awq4", "group size must be 32, 64 or 128", "G = 16"});
  expect_throw<InputError>([&] { quant::pack_awq4(64, 200, 128, i32s(1600), i32s(16), u16s(128)); },
                           {"awq4", "K (in features) must be a multiple of 128", "K = 200"});
  expect_throw<InputError>([&] { quant::pack_awq4(60, 256, 128, i32s(2048), i32s(16), u16s(128)); },
                           {"awq4", "N (out features) must be a multiple of 8", "N = 60"});
  expect_throw<InputError>([&] { quant::pack_awq4(64, 256, 128, i32s(2048), i32s(15), u16s(128)); },
                           {"awq4", "qzeros", "[K/G][N/8] = [2][8]", "15 elements"});
  expect_throw<InputError>([&] { quant::pack_awq4(64, 256, 128, i32s(2047), i32s(16), u16s(128)); },
                           {"qweight", "[K][N/8] = [256][8]"});
  expect_throw<InputError>([&] { quant::pack_awq4(64, 256, 128, i32s(2048), i32s(16), u16s(64)); },
                           {"scales", "[K/G][N] = [2][64]"});

  // gptq4: qweight [K/8][N] = [32][64].
  expect_throw<InputError>([&] { quant::pack_gptq4(64, 256, 128, i32s(2047), i32s(16), u16s(128), {}); },
                           {"gptq4", "qweight", "[K/8][N] = [32][64]"});
  expect_throw<InputError>([&] { quant::pack_gptq4(64, 256, 128, i32s(2048), i32s(16), u16s(128), i32s(255)); },
                           {"gptq4", "g_idx", "[K] = [256]"});
  expect_throw<InputError>([&] { quant::pack_gptq4(60, 256, 128, i32s(1920), i32s(15), u16s(120), {}); },
                           {"gptq4", "multiple of 8", "zero points"});
  std::vector<int32_t> g_idx(256);
  for (int i = 0; i < 256; ++i) g_idx[size_t(i)] = i / 128;
  g_idx[3] = 2;
  expect_throw<InputError>([&] { quant::pack_gptq4(64, 256, 128, i32s(2048), i32s(16), u16s(128), g_idx); },
                           {"gptq4", "g_idx[3] = 2", "[0, 2)"});
  g_idx[3] = 1;  // group 0 now has 127 columns, group 1 has 129
  expect_throw<InputError>([&] { quant::pack_gptq4(64, 256, 128, i32s(2048), i32s(16), u16s(128), g_idx); },
                           {"gptq4", "127 columns in group 0", "exactly G"});

  expect_throw<InputError>([&] { quant::pack_fp8b32(40, 48, u8s(40 * 48), u8s(2)); },
                           {"fp8b32", "multiple of 32", "K = 48"});
  expect_throw<InputError>([&] { quant::pack_fp8b32(40, 64, u8s(40 * 64), u8s(3)); },
                           {"fp8b32", "scales", "[⌈N/32⌉][K/32] = [2][2]"});
  expect_throw<InputError>([&] { quant::pack_fp8b128(300, 130, u8s(300 * 130), f32s(4), quant::Fp8Scales::kBlock128); },
                           {"fp8b128", "weight_scale_inv", "[⌈N/128⌉][⌈K/128⌉] = [3][2]"});
  expect_throw<InputError>(
      [&] { quant::pack_fp8b128(300, 130, u8s(300 * 130), f32s(6), quant::Fp8Scales::kPerChannel); },
      {"fp8b128", "weight_scale_inv", "[N] (per channel) = [300]"});
  expect_throw<InputError>([&] { quant::pack_nvfp4(4, 24, u8s(48), u8s(4), 1.f); },
                           {"nvfp4", "multiple of 16", "K = 24"});
  expect_throw<InputError>([&] { quant::pack_nvfp4(4, 32, u8s(64), u8s(4), 1.f); },
                           {"nvfp4", "weight_scale", "[N][K/16] = [4][2]"});
  expect_throw<InputError>([&] { quant::pack_mxfp4(4, 48, u8s(96), u8s(6)); }, {"mxfp4", "multiple of 32"});
  expect_throw<InputError>([&] { quant::pack_mxfp4(4, 64, u8s(127), u8s(8)); },
                           {"mxfp4", "blocks", "[N][K/2] = [4][32]"});
}

// ---------------------------------------------------------------------------------------
// The CPU reference with each epilogue against a naive triple loop.

TEST(CpuGemm, EpiloguesMatchNaiveLoops) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  const int64_t m = 5, n = 18, k = 96;
  std::vector<uint16_t> w(static_cast<size_t>(n * k)), bias(static_cast<size_t>(n)),
      residual(static_cast<size_t>(m * n));
  for (auto& v : w) v = rng.half(-0.5, 0.5);
  for (auto& v : bias) v = rng.half(-1, 1);
  for (auto& v : residual) v = rng.half(-1, 1);
  const std::vector<uint16_t> x = random_x(rng, m, k);
  const PackedWeight p = quant::pack_f16(n, k, w);
  const std::vector<double> acc =
      naive_product(x, m, k, n, [&](int64_t r, int64_t c) { return half_to_float(w[size_t(r * k + c)]); });

  std::vector<float> y(static_cast<size_t>(m * n));
  cpu::gemm(p, x.data(), m, {}, y.data());
  expect_close(y, acc);

  cpu::GemmEpilogue epi;
  epi.kind = cpu::GemmEpilogue::kBias;
  epi.bias = bias.data();
  cpu::gemm(p, x.data(), m, epi, y.data());
  std::vector<double> want(acc);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) want[size_t(i * n + j)] += half_to_float(bias[size_t(j)]);
  expect_close(y, want);

  epi = {};
  epi.kind = cpu::GemmEpilogue::kResidual;
  epi.residual = residual.data();
  cpu::gemm(p, x.data(), m, epi, y.data());
  want = acc;
  for (size_t i = 0; i < want.size(); ++i) want[i] += half_to_float(residual[i]);
  expect_close(y, want);

  epi = {};
  epi.kind = cpu::GemmEpilogue::kSiluMul;
  std::vector<float> half_y(static_cast<size_t>(m * n / 2));
  cpu::gemm(p, x.data(), m, epi, half_y.data());
  want.assign(size_t(m * n / 2), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n / 2; ++j) {
      const double g = acc[size_t(i * n + j)], u = acc[size_t(i * n + n / 2 + j)];
      want[size_t(i * (n / 2) + j)] = g / (1 + std::exp(-g)) * u;
    }
  }
  expect_close(half_y, want);
}

TEST(CpuGemm, RefusesMissingEpilogueOperands) {
  std::vector<uint16_t> w(static_cast<size_t>(3 * 8)), x(8);
  const PackedWeight p = quant::pack_f16(3, 8, w);
  std::vector<float> y(3);
  cpu::GemmEpilogue epi;
  epi.kind = cpu::GemmEpilogue::kBias;
  expect_throw<Error>([&] { cpu::gemm(p, x.data(), 1, epi, y.data()); }, {"bias"});
  epi.kind = cpu::GemmEpilogue::kResidual;
  expect_throw<Error>([&] { cpu::gemm(p, x.data(), 1, epi, y.data()); }, {"residual"});
  epi.kind = cpu::GemmEpilogue::kSiluMul;
  expect_throw<Error>([&] { cpu::gemm(p, x.data(), 1, epi, y.data()); }, {"even N"});
  PackedWeight broken = p;
  broken.qweight.pop_back();
  expect_throw<Error>([&] { cpu::dequantize(broken); }, {"f16", "qweight"});
}

// scale_rows (a model constant folded into a weight, Granite's residual_multiplier): every
// format whose scales take any factor gives factor × the weight within one fp16 (or f32)
// rounding; power-of-two scales (fp8b32, mxfp4) refuse it by name.
TEST(QuantPack, ScaleRowsMultipliesEveryRow) {
  const uint64_t seed = fresh_seed();
  SEEDED(seed);
  Rng rng(seed);
  const int64_t n = 40, k = 128;
  const float factor = 0.22f;
  std::vector<PackedWeight> weights;
  std::vector<uint16_t> w16(size_t(n * k));
  for (auto& v : w16) v = rng.half(-2, 2);
  weights.push_back(quant::pack_f16(n, k, w16));
  std::vector<int32_t> qweight(size_t(k * n / 8)), qzeros(size_t(k / 64 * n / 8));
  std::vector<uint16_t> scales(size_t(k / 64 * n));
  for (auto& v : qweight) v = rng.i32();
  for (auto& v : qzeros) v = rng.i32();
  for (auto& v : scales) v = rng.half(1e-3, 0.05);
  weights.push_back(quant::pack_awq4(n, k, 64, qweight, qzeros, scales));
  std::vector<uint8_t> codes(size_t(n * k));
  for (auto& c : codes) c = uint8_t(rng.u32() & 0xDF);  // never the NaN code 0x7f
  std::vector<float> rows(static_cast<size_t>(n));
  for (auto& r : rows) r = 0.01f + float(rng.u32() % 100) / 1000.f;
  weights.push_back(quant::pack_fp8b128(n, k, codes, rows, quant::Fp8Scales::kPerChannel));
  std::vector<uint8_t> fp4(size_t(n * k / 2)), block_scales(size_t(n * k / 16));
  for (auto& b : fp4) b = uint8_t(rng.u32());
  for (auto& b : block_scales) b = uint8_t(0x30 + rng.u32() % 16);
  weights.push_back(quant::pack_nvfp4(n, k, fp4, block_scales, 0.125f));
  for (PackedWeight& p : weights) {
    SCOPED_TRACE(std::string(quant::format_name(p.format)));
    const std::vector<float> before = cpu::dequantize(p);
    quant::scale_rows(p, factor, "layer");
    const std::vector<float> after = cpu::dequantize(p);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      ASSERT_NEAR(after[i], before[i] * factor, std::fabs(before[i] * factor) * 1e-3f + 1e-7f) << "element " << i;
    }
  }
  std::vector<uint8_t> mx_scales(size_t(n * k / 32), 120);
  PackedWeight mx = quant::pack_mxfp4(n, k, fp4, mx_scales);
  expect_throw<InputError>([&] { quant::scale_rows(mx, factor, "model.layers.0.mlp.down_proj"); },
                           {"model.layers.0.mlp.down_proj", "mxfp4", "power-of-two"});
  PackedWeight f16 = quant::pack_f16(n, k, w16);
  expect_throw<InputError>([&] { quant::scale_rows(f16, 1e6f, "o_proj"); }, {"o_proj", "fp16's range"});
}

}  // namespace
}  // namespace onecat
