// The KV cache's element formats: fp16, or fp8 E4M3 / E5M2 with a per-tensor or per-head
// fp32 scale (value = code · scale). Decoding is exact in fp16: E5M2 is the top byte of an
// fp16; E4M3 bits placed in an fp16 give code · 2^-8 (VOLTA.md), so its 2^8 joins the scale.
// Encoding (kv_write) rounds to nearest even and saturates to the largest finite value;
// runtime/cpu/attention.cpp is its bit-exact twin.
#pragma once
#include "common/fp16.cuh"

namespace onecat {

inline constexpr int kKvF16 = 0, kKvE4m3 = 1, kKvE5m2 = 2;

template <int KV>
struct KvFormat;

template <>
struct KvFormat<kKvF16> {
  static constexpr int kBytes = 2;
  static constexpr float kDecodeFactor = 1.f;
};

template <>
struct KvFormat<kKvE4m3> {
  static constexpr int kBytes = 1;
  static constexpr float kDecodeFactor = 256.f;  // fp16 bits from the code hold code · 2^-8
  static constexpr float kMax = 448.f;
  static constexpr int kMantBits = 3, kBias = 7;
};

template <>
struct KvFormat<kKvE5m2> {
  static constexpr int kBytes = 1;
  static constexpr float kDecodeFactor = 1.f;
  static constexpr float kMax = 57344.f;
  static constexpr int kMantBits = 2, kBias = 15;
};

// Four fp8 codes (a 32-bit word, code 0 in the low byte) → two fp16x2 words (codes 0,1 and
// 2,3): E5M2 code c is the fp16 c << 8; E4M3 code c is ((c & 0x7f) << 7) | ((c & 0x80) << 8),
// the E5M2 form's magnitude one bit down (code · 2^-8, VOLTA.md) with the sign kept. For E4M3
// the prmt puts each code in the low byte of its half and its sign, replicated by prmt's
// sign mode (selector bit 3), in the high byte: one shift left by 7 then brings the magnitude
// to bits 7..13 and the sign to bit 15, and one AND clears the rest (3 instructions per half2,
// not 4: a two-mask AND/OR needs two LOP3s).
template <int KV>
__device__ __forceinline__ void attn_fp8x4_to_half2x2(unsigned w, unsigned& lo, unsigned& hi) {
  if constexpr (KV == kKvE4m3) {
    asm("prmt.b32 %0, %1, 0, 0x9180;" : "=r"(lo) : "r"(w));  // bytes: c0, sign(c0), c1, sign(c1)
    asm("prmt.b32 %0, %1, 0, 0xB3A2;" : "=r"(hi) : "r"(w));  // bytes: c2, sign(c2), c3, sign(c3)
    lo = (lo << 7) & 0xBF80BF80u;
    hi = (hi << 7) & 0xBF80BF80u;
  } else {
    asm("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(lo) : "r"(w));  // bytes: 0, c0, 0, c1
    asm("prmt.b32 %0, %1, 0, 0x3424;" : "=r"(hi) : "r"(w));  // bytes: 0, c2, 0, c3
  }
}

// Code K of each of two fp8 words a and b → fp16x2 {a's, b's}, exact as above: one prmt puts
// the codes in the high bytes (E5M2, the low bytes masked off) or, for E4M3, the codes in the
// low bytes and their replicated signs in the high bytes.
template <int KV, int K>
__device__ __forceinline__ unsigned attn_fp8_pair_to_half2(unsigned a, unsigned b) {
  unsigned r;
  if constexpr (KV == kKvE4m3) {
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "n"(K | (8 | K) << 4 | (4 + K) << 8 | (12 + K) << 12));
    return (r << 7) & 0xBF80BF80u;
  }
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "n"(K * 0x11 | (K + 4) * 0x1100));
  return r & 0xFF00FF00u;
}

// Round-to-nearest-even fp8 code of x (already divided by the scale), saturating.
template <int KV>
__device__ __forceinline__ unsigned fp8_encode(float x) {
  using F = KvFormat<KV>;
  const unsigned sign = __float_as_uint(x) >> 31 << 7;
  float a = fabsf(x);
  if (a != a) return 0x7F;  // NaN stays NaN (both formats: all exponent bits set, mantissa non-zero)
  a = fminf(a, F::kMax);
  constexpr int kMinNormalExp = 1 - F::kBias;
  if (a < __int_as_float((kMinNormalExp + 127) << 23)) {
    // Subnormal: a multiple of 2^(kMinNormalExp - kMantBits); 1 << kMantBits rounds up into the first normal code.
    return sign | unsigned(rintf(a * __int_as_float((F::kMantBits - kMinNormalExp + 127) << 23)));
  }
  int e = int(__float_as_uint(a) >> 23) - 127;
  const float m = rintf(a * __int_as_float((127 - e + F::kMantBits) << 23));  // in [2^M, 2^(M+1)]
  unsigned mant = unsigned(m) - (1u << F::kMantBits);
  if (mant == (1u << F::kMantBits)) {
    mant = 0;
    ++e;
  }
  return sign | unsigned(e + F::kBias) << F::kMantBits | mant;
}

}  // namespace onecat
