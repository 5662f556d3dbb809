#include "tuner/random_weight.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "models/quant/e4m3.h"
#include "runtime/cpu/half.h"

namespace onecat {
namespace {

using quant::WeightFormat;

void put_half(std::vector<uint8_t>& v, size_t i, float f) {
  uint16_t h = cpu::float_to_half(f);
  std::memcpy(v.data() + 2 * i, &h, 2);
}

// A random E4M3 byte that is not NaN.
uint8_t random_e4m3(std::mt19937_64& rng) {
  uint8_t b;
  do b = static_cast<uint8_t>(rng()); while (quant::e4m3_is_nan(b));
  return b;
}

}  // namespace

quant::PackedWeight random_packed_weight(const gemm::Spec& s, std::mt19937_64& rng) {
  quant::PackedWeight w;
  w.format = s.format;
  w.n = s.n;
  w.k = s.k;
  w.group = s.group;
  const size_t n = size_t(s.n), k = size_t(s.k);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  auto random_bytes = [&](std::vector<uint8_t>& v, size_t count) {
    v.resize(count);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
  };
  switch (s.format) {
    case WeightFormat::kF16:
      w.qweight.resize(n * k * 2);
      for (size_t i = 0; i < n * k; ++i) put_half(w.qweight, i, 0.1f * unit(rng));
      break;
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4: {
      random_bytes(w.qweight, n * k / 2);
      const size_t groups = n * (k / s.group);
      w.scales.resize(groups * 2);
      w.zeros.resize(groups * 2);
      std::uniform_real_distribution<float> scale(0.002f, 0.02f);
      for (size_t i = 0; i < groups; ++i) {
        put_half(w.scales, i, scale(rng));
        put_half(w.zeros, i, s.format == WeightFormat::kGptq4 ? 8.f : float(rng() % 16));
      }
      if (s.act_order) {
        w.perm.resize(k);
        std::iota(w.perm.begin(), w.perm.end(), 0);
        std::shuffle(w.perm.begin(), w.perm.end(), rng);
      }
      break;
    }
    case WeightFormat::kFp8B32: {
      w.qweight.resize(n * k);
      for (auto& b : w.qweight) b = random_e4m3(rng);
      w.scales.resize(((n + 31) / 32) * (k / 32));
      for (auto& e : w.scales) e = static_cast<uint8_t>(static_cast<int8_t>(-10 + int(rng() % 7)));  // 2^-10 … 2^-4
      break;
    }
    case WeightFormat::kFp8B128: {
      w.qweight.resize(n * k);
      for (auto& b : w.qweight) b = random_e4m3(rng);
      const size_t count = s.group == 0 ? n : ((n + 127) / 128) * ((k + 127) / 128);
      w.scales.resize(count * 4);
      std::uniform_real_distribution<float> scale(1e-4f, 1e-3f);
      for (size_t i = 0; i < count; ++i) {
        float f = scale(rng);
        std::memcpy(w.scales.data() + 4 * i, &f, 4);
      }
      break;
    }
    case WeightFormat::kNvfp4: {
      random_bytes(w.qweight, n * k / 2);
      w.scales.resize(n * k / 16);
      // Positive E4M3 scales between 2^-2 and 2^5, as ModelOpt's per-block scales are.
      for (auto& b : w.scales) b = static_cast<uint8_t>(((5 + rng() % 8) << 3) | (rng() & 7));
      w.global_scale = 1.f / 512;
      break;
    }
    case WeightFormat::kMxfp4: {
      random_bytes(w.qweight, n * k / 2);
      w.scales.resize(n * k / 32);
      // 2^-7 … 2^3: block scales of 2, 4 and 8 too, past fp16's range as one factor (formats.cuh).
      // A block with a scale ≥ 2 keeps its codes to 0 and ±0.5, so its weights stay as large as
      // the others' and no product (SiLU(gate)·up over K = 1024 and more) overflows fp16.
      // Blocks are 16 consecutive bytes of the packed row (8 codes per u32, 4 u32 per block).
      for (size_t b = 0; b < w.scales.size(); ++b) {
        const uint8_t e = static_cast<uint8_t>(120 + rng() % 11);
        w.scales[b] = e;
        if (e >= 128) {
          for (size_t i = 16 * b; i < 16 * b + 16; ++i) w.qweight[i] &= 0x99;
        }
      }
      break;
    }
  }
  return w;
}

std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = cpu::float_to_half(dist(rng));
  return v;
}

}  // namespace onecat
