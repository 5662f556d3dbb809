// fp16 storage type and conversions through PTX: no cuda_fp16.h, so NVRTC needs no toolkit
// headers at run time (ARCHITECTURE.md, templates/).
#pragma once

namespace onecat {

struct half_t {
  unsigned short bits;
};

__device__ __forceinline__ float half_to_float(half_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}

// Round to nearest even, as the CPU reference does.
__device__ __forceinline__ half_t float_to_half(float f) {
  half_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}

}  // namespace onecat

namespace onecat {

// Two fp16 values in one 32-bit register: low half first (the f16x2 PTX type).
struct half2_t {
  unsigned bits;
};

__device__ __forceinline__ half2_t hfma2(half2_t a, half2_t b, half2_t c) {
  half2_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d.bits) : "r"(a.bits), "r"(b.bits), "r"(c.bits));
  return d;
}

__device__ __forceinline__ half2_t hmul2(half2_t a, half2_t b) {
  half2_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d.bits) : "r"(a.bits), "r"(b.bits));
  return d;
}

__device__ __forceinline__ half2_t hsub2(half2_t a, half2_t b) {
  half2_t d;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d.bits) : "r"(a.bits), "r"(b.bits));
  return d;
}

__device__ __forceinline__ half2_t half2_splat(half_t h) { return half2_t{unsigned(h.bits) | (unsigned(h.bits) << 16)}; }

__device__ __forceinline__ float2 half2_to_float2(half2_t h) {
  return make_float2(half_to_float(half_t{(unsigned short)(h.bits & 0xffff)}),
                     half_to_float(half_t{(unsigned short)(h.bits >> 16)}));
}

// Each rounded to nearest even.
__device__ __forceinline__ half2_t float2_to_half2(float lo, float hi) {
  return half2_t{unsigned(float_to_half(lo).bits) | (unsigned(float_to_half(hi).bits) << 16)};
}

// lo + hi of a pair, in fp32.
__device__ __forceinline__ float half2_sum(half2_t h) {
  return half_to_float(half_t{(unsigned short)(h.bits & 0xffff)}) + half_to_float(half_t{(unsigned short)(h.bits >> 16)});
}

}  // namespace onecat
