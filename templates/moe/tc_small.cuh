// moe op=gate_up and op=down, strategy=tc_small (sm_80+): the gemm family's tc_small tile
// (templates/gemm/tc_small.cuh, tc_small_tile) over the tiles of each expert's pairs, for
// decode batches whose experts get a few pairs each. A tile is up to MT (8 or 16) pairs routed
// to one expert, in pair order (op=route's grouping); blockIdx.y is the tile (moe_find_tile,
// templates/moe/gemv.cuh) and blockIdx.x the CTA's ROWS output rows. The weights are the mma's
// 16-row A operand and the pairs' x rows its 8-column B operand, so each weight chunk is
// decoded once for every pair of the tile, where the gemv decodes it once per pair; x rows are
// read by index (gate_up: the pair's token row; down: the pair's h row) and each output row is
// written at its pair.
//   gate_up (GATED): out is h [pairs][N/2] fp16 = silu(gate) · up.
//   down: out is [pairs][N] fp32 (op=combine weighs and sums the slots).
// The weights, slots and strides are as for strategy=gemv.
#pragma once
#include "common/grid.cuh"
#include "gemm/tc_small.cuh"
#include "moe/gemv.cuh"

namespace onecat {

template <class Fmt, int N, int K, int EXPERTS, int TOPK, int MT, int ROWS, int WARPS, int STAGES, bool GATED,
          bool ACT_ORDER>
__global__ void __launch_bounds__(WARPS* kWarpSize, 1)
    moe_tc_small_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                        const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                        const float* __restrict__ global_scales, const int* __restrict__ offsets,
                        const int* __restrict__ sorted, const int* __restrict__ slot, long long qweight_stride,
                        long long scales_stride, long long zeros_stride) {
  grid_dependency_sync();
  constexpr int kThreads = WARPS * kWarpSize;
  constexpr int kOutRows = GATED ? N / 2 : N;
  const MoeTile tile = moe_find_tile<EXPERTS, MT, kThreads>(offsets, slot, blockIdx.y);
  if (tile.count == 0) return;
  __shared__ int pair[MT];
  moe_tile_pairs<MT, kThreads>(pair, tile, sorted);
  const MoeExpert ex = moe_expert<K, ACT_ORDER>(tile, qweight, scales, zeros, perm, global_scales, qweight_stride,
                                                scales_stride, zeros_stride);
  tc_small_tile<Fmt, N, K, MT, ROWS, WARPS, STAGES, 1, GATED ? kEpiSiluMul : kEpiNone, ACT_ORDER>(
      [&](int j) { return x + static_cast<long long>(GATED ? pair[j] / TOPK : pair[j]) * K; }, tile.count, ex.w,
      ex.scales, ex.zeros, ex.perm, ex.gscale, blockIdx.x * ROWS, 0, nullptr, nullptr,
      [&](int j, int n, float v) { store_out<!GATED>(y, static_cast<long long>(pair[j]) * kOutRows + n, v); });
}

}  // namespace onecat
