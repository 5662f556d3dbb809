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

// The m16n8k16 mma strategies' epilogue, from registers: a warp's acc[i][j][h*2 + e] is token
// tok0 + i*16 + lane/4 + 8h (tok0: the warp's first token), column 2*(lane%4) + e of its n-tile
// j (WARP_N weight rows from n0 + wn*WARP_N; gated tiles pair 16 gate and 16 up rows).
template <int FM, int FN, int WARP_N, int OUT_ROWS, int EPI, bool OUT_F32>
__device__ __forceinline__ void store_mma16816_tile(const float (&acc)[FM][FN][4], void* y, int m, int tok0, int n0,
                                                    int wn, int lane, float global_scale,
                                                    const half_t* __restrict__ bias,
                                                    const half_t* __restrict__ residual) {
  constexpr bool kGated = EPI == kEpiSiluMul;
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tok = tok0 + i * 16 + lane / 4 + 8 * h;
      if (tok >= m) continue;
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        if (kGated && j % 4 >= 2) continue;  // up tiles are read with their gate tiles
        const int col0 = kGated ? n0 + (wn * WARP_N / 32 + j / 4) * 16 + (j % 4) * 8 + 2 * (lane % 4)
                                : n0 + wn * WARP_N + j * 8 + 2 * (lane % 4);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = col0 + e;
          if (n >= OUT_ROWS) continue;
          float v = acc[i][j][h * 2 + e] * global_scale;
          const long long out = static_cast<long long>(tok) * OUT_ROWS + n;
          if constexpr (kGated) v = silu(v) * (acc[i][j + 2][h * 2 + e] * global_scale);
          if constexpr (EPI == kEpiBias) v += half_to_float(bias[n]);
          if constexpr (EPI == kEpiResidual) v += half_to_float(residual[out]);
          store_out<OUT_F32>(y, out, v);
        }
      }
    }
  }
}

}  // namespace onecat
