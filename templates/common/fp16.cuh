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
