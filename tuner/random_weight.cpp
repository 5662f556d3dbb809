#include "tuner/random_weight.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "base/e4m3.h"
#include "base/half.h"
#include "runtime/cpu/parallel.h"

namespace onecat {
namespace {

using quant::WeightFormat;

void put_half(std::vector<uint8_t>& v, size_t i, float f) {
  uint16_t h = cpu::float_to_half(f);
  std::memcpy(v.data() + 2 * i, &h, 2);
}

// Random bytes, E4M3 codes other than NaN where `e4m3` (fill_random_chunks: one draw of rng).
void random_bytes(std::mt19937_64& rng, std::vector<uint8_t>& v, size_t count, bool e4m3 = false) {
  v.resize(count);
  fill_random_chunks(rng, count, [&](size_t begin, size_t end, SplitMix64& r) {
    for (size_t i = begin; i < end; ++i) {
      do v[i] = static_cast<uint8_t>(r.next() >> 56); while (e4m3 && quant::e4m3_is_nan(v[i]));
    }
  });
}

}  // namespace

quant::PackedWeight random_packed_weight(const gemm::Spec& s, std::mt19937_64& rng) {
  quant::PackedWeight w;
  w.format = s.format;
  w.n = s.n;
  w.k = s.k;
  w.group = s.group;
  const size_t n = size_t(s.n), k = size_t(s.k);
  switch (s.format) {
    case WeightFormat::kF16:
      w.qweight.resize(n * k * 2);
      random_half_into(rng, w.qweight.data(), n * k, -0.1f, 0.1f);
      break;
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4: {
      random_bytes(rng, w.qweight, n * k / 2);
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
      random_bytes(rng, w.qweight, n * k, true);
      w.scales.resize(((n + 31) / 32) * (k / 32));
      // 2^-10 … 2^-4; 2^-14 … 2^-8 under silu_mul, whose output is the product of two dot
      // products: the wider scales made SiLU(gate)·up overflow fp16 at K = 4096 (Llama's gate_up),
      // in the kernel and the reference alike. 2^-14 keeps every code a normal fp16 or above 2^-24.
      const int low = s.epilogue == gemm::Epilogue::kSiluMul ? -14 : -10;
      for (auto& e : w.scales) e = static_cast<uint8_t>(static_cast<int8_t>(low + int(rng() % 7)));
      break;
    }
    case WeightFormat::kFp8B128: {
      random_bytes(rng, w.qweight, n * k, true);
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
      random_bytes(rng, w.qweight, n * k / 2);
      w.scales.resize(n * k / 16);
      // Positive E4M3 scales between 2^-2 and 2^5, as ModelOpt's per-block scales are.
      for (auto& b : w.scales) b = static_cast<uint8_t>(((5 + rng() % 8) << 3) | (rng() & 7));
      w.global_scale = 1.f / 512;
      break;
    }
    case WeightFormat::kMxfp4: {
      random_bytes(rng, w.qweight, n * k / 2);
      w.scales.resize(n * k / 32);
      // 2^-7 … 2^3: block scales of 2, 4 and 8 too, past fp16's range as one factor (formats.cuh).
      // A block with a scale ≥ 2 keeps its codes to 0 and ±0.5, so its weights stay as large as
      // the others'. Blocks are 16 consecutive bytes of the packed row (8 codes per u32, 4 u32 per
      // block). Under silu_mul 2^-13 … 2^-3 (no block ≥ 2 then): with the wider scales SiLU(gate)·up,
      // a product of two dot products, overflowed fp16 at K = 4096.
      const int low = s.epilogue == gemm::Epilogue::kSiluMul ? 114 : 120;
      for (size_t b = 0; b < w.scales.size(); ++b) {
        const uint8_t e = static_cast<uint8_t>(low + int(rng() % 11));
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

void fill_random_chunks(std::mt19937_64& rng, size_t n, const std::function<void(size_t, size_t, SplitMix64&)>& fill) {
  const uint64_t base = rng();
  cpu::parallel_chunks(int64_t(n), kRandomChunk, [&](int64_t begin, int64_t end) {
    SplitMix64 stream{base ^ (0x9e3779b97f4a7c15ull * uint64_t(begin / kRandomChunk + 1))};
    fill(size_t(begin), size_t(end), stream);
  });
}

void random_half_into(std::mt19937_64& rng, void* out, size_t n, float lo, float hi) {
  unsigned char* bytes = static_cast<unsigned char*>(out);
  fill_random_chunks(rng, n, [&](size_t begin, size_t end, SplitMix64& r) {
    for (size_t i = begin; i < end; ++i) {
      const uint16_t h = cpu::float_to_half(r.uniform(lo, hi));
      std::memcpy(bytes + 2 * i, &h, 2);
    }
  });
}

std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::vector<uint16_t> v(n);
  random_half_into(rng, v.data(), n, lo, hi);
  return v;
}

}  // namespace onecat
