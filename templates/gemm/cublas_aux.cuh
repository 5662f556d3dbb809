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
    // A chunk's fp16 weights are 16-byte slots at w16 + i·kPerChunk (W is dense, so the chunks
    // of a warp are one contiguous run). Stored straight from the thread that decoded them, a
    // warp's store instruction would hit every other or every fourth slot of its run; the warp
    // exchanges them through shared memory instead, so each store is 512 contiguous bytes.
    // Slots sit XOR-rotated there so neither the writes nor the reads conflict on a bank.
    constexpr int kSlots = Fmt::kPerChunk / 8, kLanesPer128 = 8 / kSlots;
    constexpr int kChunksPerRow = K / Fmt::kPerChunk;
    constexpr long long kChunks = static_cast<long long>(N) * kChunksPerRow;
    const int lane = threadIdx.x & 31;
    const long long warp_first = i - lane;
    if (warp_first >= kChunks) return;
    __shared__ uint4 stage[kCublasAuxThreads * kSlots];
    uint4* mine = stage + (threadIdx.x & ~31) * kSlots;
    if (i < kChunks) {
      const int row = static_cast<int>(i / kChunksPerRow), c = static_cast<int>(i % kChunksPerRow);
      const Raw16 raw = gmem_load_nc<16>(static_cast<const char*>(qweight) + i * 16);
      half2_t d[Fmt::kPerChunk / 2];
      decode_chunk_full<Fmt>(raw, Fmt::load_scale(scales, zeros, row, c), d);
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        mine[lane * kSlots + (k + lane / kLanesPer128) % kSlots] =
            make_uint4(d[4 * k].bits, d[4 * k + 1].bits, d[4 * k + 2].bits, d[4 * k + 3].bits);
      }
    }
    __syncwarp();
    const int valid = static_cast<int>(kChunks - warp_first < 32 ? kChunks - warp_first : 32);
    uint4* dst = reinterpret_cast<uint4*>(w16 + warp_first * Fmt::kPerChunk);
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int q = j * 32 + lane, from = q / kSlots;
      if (from < valid) {
        const uint4 v = mine[from * kSlots + (q % kSlots + from / kLanesPer128) % kSlots];
        asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(dst + q), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
      }
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
