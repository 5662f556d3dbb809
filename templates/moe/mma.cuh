// moe op=gate_up and op=down, strategy=mma: the gemm family's tensor-core tile
// (templates/gemm/mma.cuh, mma_tile) over the tiles of each expert's pairs, for prefill. A tile
// is up to BM pairs routed to one expert, in pair order (op=route's grouping); blockIdx.y is
// the tile (moe_find_tile, templates/moe/gemv.cuh) and blockIdx.x the output columns. The
// tile's x rows are read by index (gate_up: the pair's token row; down: the pair's h row), so no
// expanded copy of the input exists, and each output row is written at its pair.
//   gate_up (GATED): out is h [pairs][N/2] fp16 = silu(gate) · up.
//   down: out is [pairs][N] fp32 (op=combine weighs and sums the slots).
// The weights, slots and strides are as for strategy=gemv.
#pragma once
#include "common/grid.cuh"
#include "gemm/mma.cuh"
#include "moe/gemv.cuh"

namespace onecat {

template <class Fmt, int N, int K, int EXPERTS, int TOPK, int BM, int BN, int WM, int WN, bool GATED, bool ACT_ORDER>
__global__ void __launch_bounds__(WM* WN * 32, 1)
    moe_mma_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                   const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                   const float* __restrict__ global_scales, const int* __restrict__ offsets,
                   const int* __restrict__ sorted, const int* __restrict__ slot, long long qweight_stride,
                   long long scales_stride, long long zeros_stride) {
  grid_dependency_sync();
  constexpr int kThreads = WM * WN * 32;
  constexpr int kOutRows = GATED ? N / 2 : N;
  constexpr int kTileCols = GATED ? BN / 2 : BN;
  const MoeTile tile = moe_find_tile<EXPERTS, BM, kThreads>(offsets, slot, blockIdx.y);
  if (tile.count == 0) return;
  __shared__ int pair[BM];
  moe_tile_pairs<BM, kThreads>(pair, tile, sorted);
  const MoeExpert ex = moe_expert<K, ACT_ORDER>(tile, qweight, scales, zeros, perm, global_scales, qweight_stride,
                                                scales_stride, zeros_stride);
  mma_tile<Fmt, N, K, BM, BN, WM, WN, 1, GATED ? kEpiSiluMul : kEpiNone, ACT_ORDER>(
      [&](int r) { return x + static_cast<long long>(GATED ? pair[r] / TOPK : pair[r]) * K; }, tile.count, ex.w,
      ex.scales, ex.zeros, ex.perm, ex.gscale, blockIdx.x * kTileCols, nullptr, nullptr, [&](int r, int n, float v) {
        const long long out = static_cast<long long>(pair[r]) * kOutRows + n;
        store_out<!GATED>(y, out, v);
      });
}

}  // namespace onecat
