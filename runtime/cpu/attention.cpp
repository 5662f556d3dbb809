#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "runtime/cpu/parallel.h"

namespace onecat::cpu {
namespace {

struct Fp8Format {
  int mant_bits, bias;
  float max;
};

Fp8Format format_of(KvDtype d) {
  if (d == KvDtype::kE4m3) return {3, 7, 448.f};
  if (d == KvDtype::kE5m2) return {2, 15, 57344.f};
  throw Error("fp8 code asked of an fp16 KV cache");
}

}  // namespace

float fp8_decode(uint8_t code, KvDtype dtype) {
  const Fp8Format f = format_of(dtype);
  const int exp_bits = 7 - f.mant_bits;
  const int e = (code >> f.mant_bits) & ((1 << exp_bits) - 1);
  const int m = code & ((1 << f.mant_bits) - 1);
  const float sign = code & 0x80 ? -1.f : 1.f;
  if (dtype == KvDtype::kE4m3 && e == 15 && m == 7) return NAN;
  if (dtype == KvDtype::kE5m2 && e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(float(m), 1 - f.bias - f.mant_bits);
  return sign * std::ldexp(float(m + (1 << f.mant_bits)), e - f.bias - f.mant_bits);
}

uint8_t fp8_encode(float x, KvDtype dtype) {
  const Fp8Format f = format_of(dtype);
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::min(std::fabs(x), f.max);
  const int min_normal_exp = 1 - f.bias;
  if (a < std::ldexp(1.f, min_normal_exp)) {
    return uint8_t(sign | int(std::nearbyint(std::ldexp(a, f.mant_bits - min_normal_exp))));
  }
  int e;
  std::frexp(a, &e);
  --e;  // a = 1.x · 2^e
  int mant = int(std::nearbyint(std::ldexp(a, f.mant_bits - e))) - (1 << f.mant_bits);
  if (mant == (1 << f.mant_bits)) {
    mant = 0;
    ++e;
  }
  return uint8_t(sign | (e + f.bias) << f.mant_bits | mant);
}

float PagedKv::value(bool is_v, int64_t page_id, int head, int row, int d) const {
  const int64_t at = ((page_id * kv_heads + head) * page + row) * dim + d;
  const void* base = is_v ? v : k;
  if (dtype == KvDtype::kF16) return half_to_float(static_cast<const uint16_t*>(base)[at]);
  const float* scale = is_v ? v_scale : k_scale;
  return fp8_decode(static_cast<const uint8_t*>(base)[at], dtype) * scale[scale_per_head ? head : 0];
}

void PagedKv::row(bool is_v, int64_t page_id, int head, int r, const float* lut, float* out) const {
  const int64_t at = ((page_id * kv_heads + head) * page + r) * dim;
  if (dtype == KvDtype::kF16) {
    const uint16_t* src = static_cast<const uint16_t*>(is_v ? v : k) + at;
    for (int d = 0; d < dim; ++d) out[d] = half_to_float(src[d]);
    return;
  }
  const uint8_t* src = static_cast<const uint8_t*>(is_v ? v : k) + at;
  const float scale = (is_v ? v_scale : k_scale)[scale_per_head ? head : 0];
  for (int d = 0; d < dim; ++d) out[d] = lut[src[d]] * scale;
}

std::vector<float> fp8_lut(KvDtype dtype) {
  std::vector<float> lut;
  if (dtype == KvDtype::kF16) return lut;
  for (int code = 0; code < 256; ++code) lut.push_back(fp8_decode(uint8_t(code), dtype));
  return lut;
}

void kv_write(const PagedKv& c, const uint16_t* k, const uint16_t* v, const int* slot_mapping, int64_t tokens) {
  for (int64_t t = 0; t < tokens; ++t) {
    const int slot = slot_mapping[t];
    if (slot < 0) continue;
    for (int h = 0; h < c.kv_heads; ++h) {
      const int64_t dst = ((int64_t(slot / c.page) * c.kv_heads + h) * c.page + slot % c.page) * c.dim;
      const int64_t src = (t * c.kv_heads + h) * c.dim;
      if (c.dtype == KvDtype::kF16) {
        std::memcpy(static_cast<uint16_t*>(c.k) + dst, k + src, size_t(c.dim) * 2);
        std::memcpy(static_cast<uint16_t*>(c.v) + dst, v + src, size_t(c.dim) * 2);
        continue;
      }
      const float ks = c.k_scale[c.scale_per_head ? h : 0], vs = c.v_scale[c.scale_per_head ? h : 0];
      for (int d = 0; d < c.dim; ++d) {
        static_cast<uint8_t*>(c.k)[dst + d] = fp8_encode(half_to_float(k[src + d]) / ks, c.dtype);
        static_cast<uint8_t*>(c.v)[dst + d] = fp8_encode(half_to_float(v[src + d]) / vs, c.dtype);
      }
    }
  }
}

void attention(uint16_t* out, const uint16_t* q, const PagedKv& c, const int* block_table, int max_pages,
               const int* seq_lens, const int* cu_q, int batch, const AttentionShape& s) {
  if (s.heads % c.kv_heads != 0) throw Error("attention reference: heads must be a multiple of kv_heads");
  const int group = s.heads / c.kv_heads, dim = c.dim;
  // One work item per query token (its sequence found from cu_q); tokens run in parallel.
  // The token's visible K and V rows of one KV head are decoded once into floats and serve
  // the group's query heads (the same values and the same fp64 sums, in the same order, as
  // reading each element through PagedKv::value).
  const std::vector<float> lut = fp8_lut(c.dtype);
  const int64_t tokens = cu_q[batch];
  parallel_for(tokens, [&](int64_t token) {
    const int b = int(std::upper_bound(cu_q, cu_q + batch + 1, int(token)) - cu_q) - 1;
    const int t = int(token) - cu_q[b];
    const int q_len = cu_q[b + 1] - cu_q[b], len = seq_lens[b];
    const int pos = len - q_len + t;
    const int hi = s.causal ? std::min(len, pos + 1) : len;
    const int lo = s.window > 0 ? std::max(0, pos - s.window + 1) : 0;
    const int n = std::max(0, hi - lo);
    std::vector<float> kf(size_t(n) * dim), vf(size_t(n) * dim);
    std::vector<double> scores(static_cast<size_t>(n)), acc(static_cast<size_t>(dim)), qd(static_cast<size_t>(dim));
    for (int kvh = 0; kvh < c.kv_heads; ++kvh) {
      for (int j = lo; j < hi; ++j) {
        const int64_t page_id = block_table[int64_t(b) * max_pages + j / c.page];
        c.row(false, page_id, kvh, j % c.page, lut.data(), kf.data() + size_t(j - lo) * dim);
        c.row(true, page_id, kvh, j % c.page, lut.data(), vf.data() + size_t(j - lo) * dim);
      }
      for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
        const uint16_t* qrow = q + (token * s.heads + h) * dim;
        uint16_t* orow = out + (token * s.heads + h) * dim;
        for (int d = 0; d < dim; ++d) qd[size_t(d)] = double(half_to_float(qrow[d]));
        double mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const float* krow = kf.data() + size_t(j) * dim;
          double dot = 0;
          for (int d = 0; d < dim; ++d) dot += qd[size_t(d)] * double(krow[d]);
          scores[size_t(j)] = dot * s.sm_scale;
          mx = std::max(mx, scores[size_t(j)]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        for (int j = 0; j < n; ++j) {
          const double p = std::exp(scores[size_t(j)] - mx);
          sum += p;
          const float* vrow = vf.data() + size_t(j) * dim;
          for (int d = 0; d < dim; ++d) acc[size_t(d)] += p * double(vrow[d]);
        }
        for (int d = 0; d < dim; ++d) orow[d] = float_to_half(sum > 0 ? float(acc[size_t(d)] / sum) : 0.f);
      }
    }
  });
}

}  // namespace onecat::cpu
