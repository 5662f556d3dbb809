// moe op=combine: out[t] = Σ_slot weights[t][slot] · y[t·TOPK + slot] in slot order, in fp32,
// rounded once to fp16 (the same sum in the same order whatever the batch; no atomics).
#pragma once
#include "common/fp16.cuh"

namespace onecat {

template <int HIDDEN, int TOPK, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
    moe_combine_kernel(half_t* __restrict__ out, const float* __restrict__ y, const float* __restrict__ weights,
                       int tokens) {
  const int t = blockIdx.x;
  if (t >= tokens) return;
  float w[TOPK];
#pragma unroll
  for (int k = 0; k < TOPK; ++k) w[k] = weights[t * TOPK + k];
  const float* rows = y + static_cast<long long>(t) * TOPK * HIDDEN;
  for (int n = threadIdx.x; n < HIDDEN; n += THREADS) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) sum += w[k] * rows[k * HIDDEN + n];
    out[static_cast<long long>(t) * HIDDEN + n] = float_to_half(sum);
  }
}

}  // namespace onecat
