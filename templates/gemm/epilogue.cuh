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

// The weight row behind row r of an mma CTA's weight tile whose first output column is n0,
// clamped in bounds. Gated (silu_mul) tiles alternate 16 gate rows and the 16 matching up
// rows, so a warp holds both halves of its outputs.
template <int N, int EPI>
__device__ __forceinline__ int tile_weight_row(int n0, int r) {
  if constexpr (EPI == kEpiSiluMul) {
    const int o = min(n0 + (r / 32) * 16 + r % 16, N / 2 - 1);
    return (r / 16) % 2 == 0 ? o : o + N / 2;
  } else {
    return min(n0 + r, N - 1);
  }
}

template <bool OUT_F32>
__device__ __forceinline__ void store_out(void* y, long long i, float v) {
  if constexpr (OUT_F32) {
    static_cast<float*>(y)[i] = v;
  } else {
    static_cast<half_t*>(y)[i] = float_to_half(v);
  }
}

}  // namespace onecat
