// Sums over a group of GROUP consecutive lanes (a power of two) or over a whole row of
// threads spanning several warps.
#pragma once

namespace onecat {

inline constexpr int kWarpSize = 32;

// Sum over GROUP consecutive lanes (GROUP ≤ 32, a power of two); every lane gets the sum.
template <int GROUP>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int offset = GROUP / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over THREADS consecutive threads of a CTA holding ROWS such groups side by side.
// For THREADS > 32 the warps of a row meet in shared memory; every thread of the CTA must call it.
template <int THREADS, int ROWS>
__device__ __forceinline__ float row_sum(float v) {
  if constexpr (THREADS <= kWarpSize) {
    return group_sum<THREADS>(v);
  } else {
    constexpr int kWarpsPerRow = THREADS / kWarpSize;
    __shared__ float partial[ROWS][kWarpsPerRow];
    const int warp = threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
    v = group_sum<kWarpSize>(v);
    if (lane == 0) partial[warp / kWarpsPerRow][warp % kWarpsPerRow] = v;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < kWarpsPerRow; ++i) total += partial[warp / kWarpsPerRow][i];
    return total;
  }
}

}  // namespace onecat
