// RMSNorm with optional fused residual add, one row per THREADS_PER_ROW threads.
//   residual=1:  s = fp16(x + residual); residual <- s
//   residual=0:  s = x
//   out = fp16(s * rsqrt(mean(s^2) + eps) * weight), all arithmetic in fp32.
// The row stays in registers between the two passes (ITERS * VEC values per thread), so
// x and residual are read once and the kernel moves the minimum bytes.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/reduce.cuh"

namespace onecat {

template <int HIDDEN, bool RESIDUAL, int THREADS_PER_ROW, int VEC, int ROWS_PER_CTA>
__global__ void __launch_bounds__(THREADS_PER_ROW * ROWS_PER_CTA)
    rmsnorm_kernel(half_t* __restrict__ out, const half_t* __restrict__ x, half_t* __restrict__ residual,
                   const half_t* __restrict__ weight, float eps, int rows) {
  constexpr int kVectorsPerRow = HIDDEN / VEC;
  constexpr int kIters = (kVectorsPerRow + THREADS_PER_ROW - 1) / THREADS_PER_ROW;
  constexpr int kBytes = VEC * 2;
  static_assert(HIDDEN % VEC == 0, "VEC must divide HIDDEN");

  const int lane = threadIdx.x % THREADS_PER_ROW;
  // The weight is never written by a kernel of a forward pass: the CTA's first row of threads
  // asks L2 for it before the wait for the kernel before this one (common/grid.cuh; sm_90+), and
  // where a thread's share is at most 8 registers it is loaded with the row below, so the second
  // pass does not wait for it at all (a larger share would spill under 1024 threads on sm_70).
  constexpr bool kHoldWeight = kIters * ((kBytes + 3) / 4) <= 8;
  if (threadIdx.x < THREADS_PER_ROW) {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int v = it * THREADS_PER_ROW + lane;
      if (v < kVectorsPerRow) grid_dependency_prefetch_l2(weight + v * VEC);
    }
  }
  grid_dependency_sync();
  const int row = blockIdx.x * ROWS_PER_CTA + threadIdx.x / THREADS_PER_ROW;
  const bool row_valid = row < rows;  // no early return: row_sum may need every thread
  const long long base = static_cast<long long>(row) * HIDDEN;

  float s[kIters][VEC];
  Chunk<kBytes> wc[kHoldWeight ? kIters : 1];
  float sum_sq = 0.f;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int v = it * THREADS_PER_ROW + lane;
    const bool active = row_valid && v < kVectorsPerRow;
    Chunk<kBytes> xc{};
    if (active) xc = gmem_load_nc<kBytes>(x + base + v * VEC);
    if constexpr (kHoldWeight) {
      if (active) wc[it] = gmem_load_nc<kBytes>(weight + v * VEC);
    }
    if constexpr (RESIDUAL) {
      Chunk<kBytes> rc{};
      if (active) rc = gmem_load<kBytes>(residual + base + v * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        half_t sum = float_to_half(half_to_float(half_t{xc.h[j]}) + half_to_float(half_t{rc.h[j]}));
        rc.h[j] = sum.bits;
        s[it][j] = half_to_float(sum);
      }
      if (active) gmem_store<kBytes>(residual + base + v * VEC, rc);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) s[it][j] = half_to_float(half_t{xc.h[j]});
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum_sq += active ? s[it][j] * s[it][j] : 0.f;
  }

  sum_sq = row_sum<THREADS_PER_ROW, ROWS_PER_CTA>(sum_sq);
  const float inv_rms = rsqrtf(sum_sq * (1.f / HIDDEN) + eps);

#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int v = it * THREADS_PER_ROW + lane;
    if (!row_valid || v >= kVectorsPerRow) continue;
    Chunk<kBytes> w;
    if constexpr (kHoldWeight) {
      w = wc[it];
    } else {
      w = gmem_load_nc<kBytes>(weight + v * VEC);
    }
    Chunk<kBytes> oc;
#pragma unroll
    for (int j = 0; j < VEC; ++j) oc.h[j] = float_to_half(s[it][j] * inv_rms * half_to_float(half_t{w.h[j]})).bits;
    gmem_store<kBytes>(out + base + v * VEC, oc);
  }
}

}  // namespace onecat
