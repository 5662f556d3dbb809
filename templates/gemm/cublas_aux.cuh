// strategy=cublas's own kernel (codegen/gemm/op.h, runtime/engine/gemm_launch.cpp): cuBLAS
// computes the product on fp16 weights and this kernel does the rest, one phase per launch:
//   0  dequantise: the packed weights → fp16 W[N][K] (formats other than f16), every scale
//      but nvfp4's global one applied as the mma kernels apply it (decode_chunk_full); the
//      global scale is cuBLAS's alpha
//   1  silu_mul: y[t][n] = silu(p[t][n]) · p[t][n + N/2] from cuBLAS's fp32 product p
//   2  fill: y ← bias (broadcast) or residual, which cuBLAS then adds to with beta = 1
// One thread per 16-byte weight chunk (0) or per output element (1, 2).
#pragma once
#include "common/grid.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"

namespace onecat {

constexpr int kCublasAuxThreads = 256;

template <class Fmt, int N, int K, bool OUT_F32, int EPI>
__global__ void __launch_bounds__(kCublasAuxThreads)
    cublas_aux_kernel(int phase, void* __restrict__ y, const float* __restrict__ product, half_t* __restrict__ w16,
                      const void* __restrict__ qweight, const void* __restrict__ scales, const void* __restrict__ zeros,
                      const half_t* __restrict__ bias, const half_t* __restrict__ residual, int rows) {
  grid_dependency_sync();
  const long long i = static_cast<long long>(blockIdx.x) * kCublasAuxThreads + threadIdx.x;
  if (phase == 0) {
    constexpr int kChunksPerRow = K / Fmt::kPerChunk;
    if (i >= static_cast<long long>(N) * kChunksPerRow) return;
    const int row = static_cast<int>(i / kChunksPerRow), c = static_cast<int>(i % kChunksPerRow);
    const Raw16 raw = gmem_load_nc<16>(static_cast<const char*>(qweight) + i * 16);
    half2_t d[Fmt::kPerChunk / 2];
    decode_chunk_full<Fmt>(raw, Fmt::load_scale(scales, zeros, row, c), d);
    unsigned* dst = reinterpret_cast<unsigned*>(w16 + static_cast<long long>(row) * K + c * Fmt::kPerChunk);
#pragma unroll
    for (int p = 0; p < Fmt::kPerChunk / 2; p += 4) {
      asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(dst + p), "r"(d[p].bits), "r"(d[p + 1].bits),
                   "r"(d[p + 2].bits), "r"(d[p + 3].bits));
    }
    return;
  }
  constexpr int kOut = EPI == kEpiSiluMul ? N / 2 : N;
  if (i >= static_cast<long long>(rows) * kOut) return;
  const int n = static_cast<int>(i % kOut);
  if (phase == 1) {
    if constexpr (EPI == kEpiSiluMul) {
      const float* p = product + (i / kOut) * N;
      store_out<OUT_F32>(y, i, silu(p[n]) * p[n + N / 2]);
    }
    return;
  }
  if constexpr (EPI == kEpiBias) store_out<OUT_F32>(y, i, half_to_float(bias[n]));
  if constexpr (EPI == kEpiResidual) store_out<OUT_F32>(y, i, half_to_float(residual[i]));
}

}  // namespace onecat
