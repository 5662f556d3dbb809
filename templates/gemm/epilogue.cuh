// What happens to an output element of the gemm family after its dot product.
#pragma once
#include "common/fp16.cuh"

namespace onecat {

enum GemmEpilogue : int {
  kEpiNone = 0,
  kEpiBias = 1,      // y += bias[n]
  kEpiResidual = 2,  // y += residual[m][n]
  kEpiSiluMul = 3,   // W = [gate; up] (2N rows): y = silu(gate) * up
};

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

template <bool OUT_F32>
__device__ __forceinline__ void store_out(void* y, long long i, float v) {
  if constexpr (OUT_F32) {
    static_cast<float*>(y)[i] = v;
  } else {
    static_cast<half_t*>(y)[i] = float_to_half(v);
  }
}

}  // namespace onecat
