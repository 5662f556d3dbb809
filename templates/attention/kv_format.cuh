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
  __device__ __forceinline__ static unsigned short decode(unsigned b) { return ((b & 0x7F) << 7) | ((b & 0x80) << 8); }
};

template <>
struct KvFormat<kKvE5m2> {
  static constexpr int kBytes = 1;
  static constexpr float kDecodeFactor = 1.f;
  static constexpr float kMax = 57344.f;
  static constexpr int kMantBits = 2, kBias = 15;
  __device__ __forceinline__ static unsigned short decode(unsigned b) { return (b & 0xFF) << 8; }
};

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
