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

// Sums each of V values (a power of two ≤ 32) over the 32 lanes of a warp with V - 1 + log2(32/V)
// shuffles instead of 5·V: each step sends half of the values still held to the partner lane
// and keeps the other half (a transpose as it reduces). On return lane l holds the sum of
// value l / (32 / V) in v[0] (every 32/V consecutive lanes hold the same sum).
template <int V>
__device__ __forceinline__ void warp_sum_transposed(float (&v)[V]) {
  static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "V is a power of two up to 32");
  const int lane = threadIdx.x % kWarpSize;
  constexpr int kSteps = V >= 32 ? 5 : V >= 16 ? 4 : V >= 8 ? 3 : V >= 4 ? 2 : V >= 2 ? 1 : 0;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int n = V >> step, offset = (kWarpSize / 2) >> step;
    const bool upper = lane & offset;  // this lane keeps the upper half of its values
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      if (i >= n / 2) break;
      const float send = upper ? v[i] : v[i + n / 2];
      const float keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
  }
  v[0] = group_sum<kWarpSize / V>(v[0]);
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

// The exclusive prefix sum of each thread's `local` over a CTA of THREADS threads in thread
// order, and the CTA's total in `total` (every thread calls it; one barrier inside, so a second
// call needs a barrier between the two).
template <int THREADS>
__device__ __forceinline__ int block_exclusive_sum(int local, int& total) {
  constexpr int kWarps = THREADS / kWarpSize;
  __shared__ int warp_total[kWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  int incl = local;
#pragma unroll
  for (int o = 1; o < kWarpSize; o *= 2) {
    const int n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  if (lane == kWarpSize - 1) warp_total[warp] = incl;
  __syncthreads();
  int before = 0;
  total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += warp_total[w];
    total += warp_total[w];
  }
  return before + incl - local;
}

}  // namespace onecat
