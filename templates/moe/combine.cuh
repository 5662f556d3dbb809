// moe op=combine: out[t] = Σ_slot weights[t][slot] · y[t·TOPK + slot] in slot order, in fp32,
// rounded once to fp16 (the same sum in the same order whatever the batch; no atomics).
// SHARED (the shared expert, codegen/moe/spec.h): 1 adds shared[t] (fp16 [tokens][HIDDEN], the
// shared expert's output) after the sum, 2 adds sigmoid(shared_gate[t]) · shared[t] (Qwen2-MoE's
// gate, fp16 logits [tokens]).
#pragma once
#include "common/fp16.cuh"
#include "common/grid.cuh"

namespace onecat {

template <int HIDDEN, int TOPK, int THREADS, int SHARED = 0>
__global__ void __launch_bounds__(THREADS, 1)
    moe_combine_kernel(half_t* __restrict__ out, const float* __restrict__ y, const float* __restrict__ weights,
                       int tokens, const half_t* __restrict__ shared, const half_t* __restrict__ shared_gate) {
  grid_dependency_sync();
  const int t = blockIdx.x;
  if (t >= tokens) return;
  float gate = 1.f;
  if constexpr (SHARED == 2) gate = 1.f / (1.f + __expf(-half_to_float(shared_gate[t])));
  float w[TOPK];
#pragma unroll
  for (int k = 0; k < TOPK; ++k) w[k] = weights[t * TOPK + k];
  const float* rows = y + static_cast<long long>(t) * TOPK * HIDDEN;
  for (int n = threadIdx.x; n < HIDDEN; n += THREADS) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) sum += w[k] * rows[k * HIDDEN + n];
    if constexpr (SHARED != 0) sum += gate * half_to_float(shared[static_cast<long long>(t) * HIDDEN + n]);
    out[static_cast<long long>(t) * HIDDEN + n] = float_to_half(sum);
  }
}

}  // namespace onecat
