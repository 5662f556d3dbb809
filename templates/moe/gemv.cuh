// moe op=gate_up and op=down, strategy=gemv: the gemm family's gemv (templates/gemm/gemv.cuh)
// over the tiles of each expert's pairs. A tile is up to MT pairs routed to one expert, in pair
// order (op=route's grouping); blockIdx.y is the tile, found from the per-expert offsets by a
// scan of each expert's tile count (a few hundred experts: one pass of the CTA). A CTA owns
// LOOP groups of ROWS output rows of its tile, one group after the other (the next group's
// chunks are loaded before this one's sums are reduced and stored), so that the tile search
// and the start of a CTA are paid once for LOOP × ROWS rows: at decode a tile holds one or two
// pairs and a group of rows is a few kilobytes of weights. Its warps split K; each lane
// streams 16-byte chunks of the expert's weight rows, decoded in registers, once for each
// group of the tile's pairs (gemv_token_group: all of them at the usual MT).
//   gate_up (GATED): x is [tokens][K] and a pair reads its token's row (p / TOPK), the weight is
//   the expert's [gate; up] (N = 2 × the output width), out is h [pairs][N/2] fp16 =
//   silu(gate) · up.
//   down: x is h [pairs][K], out is [pairs][N] fp32 (op=combine weighs and sums the slots).
// The experts' packed weights sit at a fixed stride from one another in every buffer: expert e's
// at slot[e] (slot null: e). A launch serves the experts of one weight format; slot[e] < 0
// leaves expert e's tiles to another launch (a checkpoint may keep some experts unquantised).
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/reduce.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/gemv_chunk.cuh"

namespace onecat {

struct MoeTile {
  int expert, slot, start, count;  // count 0: past the last tile
};

// Tile `tile` of MT pairs among the pair runs of the experts this launch serves (every thread
// of the CTA calls it).
template <int EXPERTS, int MT, int THREADS>
__device__ __forceinline__ MoeTile moe_find_tile(const int* __restrict__ offsets, const int* __restrict__ slot,
                                                 int tile) {
  constexpr int kPer = (EXPERTS + THREADS - 1) / THREADS;
  __shared__ MoeTile found;
  // This thread's experts' runs (empty where another launch serves the expert), kept for the
  // search below: it reads no offset twice.
  int begin[kPer], end[kPer];
  int local = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = threadIdx.x * kPer + i;
    begin[i] = end[i] = 0;
    if (e < EXPERTS && (slot == nullptr || slot[e] >= 0)) begin[i] = offsets[e], end[i] = offsets[e + 1];
    local += (end[i] - begin[i] + MT - 1) / MT;
  }
  if (threadIdx.x == 0) found = MoeTile{0, 0, 0, 0};  // ordered before the search by the scan's barrier
  int total;
  int first = block_exclusive_sum<THREADS>(local, total);  // this thread's first tile
  if (tile < total && tile >= first && tile < first + local) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = threadIdx.x * kPer + i;
      const int tiles = (end[i] - begin[i] + MT - 1) / MT;
      if (tile < first + tiles) {
        const int start = begin[i] + (tile - first) * MT;
        found = MoeTile{e, slot == nullptr ? e : slot[e], start, min(MT, end[i] - start)};
        break;
      }
      first += tiles;
    }
  }
  __syncthreads();
  return found;
}

// The tile's expert's packed weights, scales and zeros (at its slot's stride in each buffer),
// act-order permutation (perm [slots][K]) and nvfp4 global scale (1 without).
struct MoeExpert {
  const char* w;
  const void* scales;
  const void* zeros;
  const int* perm;
  float gscale;
};
template <int K, bool ACT_ORDER>
__device__ __forceinline__ MoeExpert moe_expert(const MoeTile& tile, const void* __restrict__ qweight,
                                                const void* __restrict__ scales, const void* __restrict__ zeros,
                                                const int* __restrict__ perm, const float* __restrict__ global_scales,
                                                long long qweight_stride, long long scales_stride,
                                                long long zeros_stride) {
  return MoeExpert{static_cast<const char*>(qweight) + tile.slot * qweight_stride,
                   static_cast<const char*>(scales) + tile.slot * scales_stride,
                   static_cast<const char*>(zeros) + tile.slot * zeros_stride,
                   ACT_ORDER ? perm + static_cast<long long>(tile.slot) * K : nullptr,
                   global_scales != nullptr ? global_scales[tile.slot] : 1.f};
}

// The tile's pairs in shared memory for the tensor-core tiles (0 past its count), then a barrier.
template <int BM, int THREADS>
__device__ __forceinline__ void moe_tile_pairs(int (&pair)[BM], const MoeTile& tile, const int* __restrict__ sorted) {
  for (int r = threadIdx.x; r < BM; r += THREADS) pair[r] = r < tile.count ? sorted[tile.start + r] : 0;
  __syncthreads();
}

// One CTA's LOOP groups of ROWS output rows of a tile of `count` pairs (pair[i], i < count; -1 past) of
// the expert `ex`, from row group `row_block` × LOOP on. X_CG: x was written by other CTAs of
// the same launch (op=decode's h), so it is read through L2 (ld.global.cg), not the read-only
// path. Every thread of the CTA calls it.
template <class Fmt, int N, int K, int TOPK, int MT, int ROWS, int WARPS, int LOOP, int GROUPS, bool GATED,
          bool ACT_ORDER, bool X_CG = false>
__device__ __forceinline__ void moe_gemv_rows(void* __restrict__ y, const half_t* __restrict__ x, const MoeExpert& ex,
                                              const int (&pair)[MT], int count, int row_block) {
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kPairs = kPer / 2;
  constexpr int kChunks = K / kPer;
  constexpr int kOutRows = GATED ? N / 2 : N;
  constexpr int kSlots = GATED ? 2 * ROWS : ROWS;
  // GROUPS > 1 (one warp): the warp splits into GROUPS groups of lanes, each summing its share
  // of the slots over all chunks, so rows of a chunk count 32 does not divide keep every lane
  // busy (the 4-bit down projection of a 768-wide expert: 24 chunks, 4 groups of 8 lanes with
  // 3 chunks each, where one row at a time idles a quarter of the lanes).
  static_assert(GROUPS == 1 || WARPS == 1, "lane groups split one warp");
  constexpr int kThreads = WARPS * kWarpSize / GROUPS;  // threads splitting one slot's chunks
  constexpr int kMySlots = kSlots / GROUPS;             // a thread's slots
  constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
  constexpr bool kEvenSplit = kChunks % kThreads == 0;
  static_assert(K % kPer == 0, "K must be a multiple of the chunk");
  static_assert(kSlots % GROUPS == 0, "lane groups share the slots evenly");

  const int warp = threadIdx.x / kWarpSize;
  const int part = threadIdx.x % kThreads;              // this thread's place among its group's
  const int slot0 = threadIdx.x / kThreads * kMySlots;  // its group's first slot
  const half_t* xrow[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const int r = pair[i] < 0 ? 0 : (GATED ? pair[i] / TOPK : pair[i]);
    xrow[i] = x + static_cast<long long>(r) * K;
  }

  // Group g's first output row; the CTA's groups past the last row are skipped (the same for
  // every thread: the barriers below stay uniform).
  auto group_row0 = [&](int g) { return (row_block * LOOP + g) * ROWS; };
  int groups = 1;  // group 0 always lies inside: the grid has ceil(rows / (ROWS × LOOP)) CTAs
#pragma unroll
  for (int g = 1; g < LOOP; ++g) groups += group_row0(g) < kOutRows ? 1 : 0;
  // Weight row of slot s in group g (gate_up: the gate rows, then the up rows).
  auto row_of = [&](int g, int s) {
    const int r = kOutRows % ROWS == 0 ? group_row0(g) + s % ROWS : min(group_row0(g) + s % ROWS, kOutRows - 1);
    return (GATED && s >= ROWS) ? r + kOutRows : r;
  };

  struct Stage {
    Raw16 raw[kMySlots];
    typename Fmt::Scale sc[kMySlots];
  };
  auto load = [&](int g, int it, Stage& st) {
    const int c = it * kThreads + part;
    if (!kEvenSplit && c >= kChunks) return;
#pragma unroll
    for (int s = 0; s < kMySlots; ++s) {
      const int row = row_of(g, slot0 + s);
      st.raw[s] = gmem_load_nc<16>(ex.w + (static_cast<long long>(row) * kChunks + c) * 16);
      st.sc[s] = Fmt::load_scale(ex.scales, ex.zeros, row, c);
    }
  };
  float acc[MT][kMySlots];
  // The x of a group of kGroup pairs in registers at a time: each chunk is decoded once for
  // the group (gemv_token_group).
  constexpr int kGroup = gemv_token_group < Fmt, MT, kMySlots, WARPS, ACT_ORDER ? 2 * kPer : 0 > ();
  auto compute = [&](int it, const Stage& st) {
    const int c = it * kThreads + part;
    if (!kEvenSplit && c >= kChunks) return;
#pragma unroll
    for (int i0 = 0; i0 < MT; i0 += kGroup) {
      if (i0 >= count) continue;  // past the tile's last pair
      half2_t xs[kGroup][kPairs];
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        if (i0 + j < MT && i0 + j < count) {
          gemv_x_chunk<Fmt, ACT_ORDER, X_CG>(xrow[i0 + j], ex.perm, c, xs[j]);
        } else {  // its sums are not kept; zeros keep them finite
#pragma unroll
          for (int p = 0; p < kPairs; ++p) xs[j][p] = half2_t{0u};
        }
      }
#pragma unroll
      for (int s = 0; s < kMySlots; ++s) {
        float d[kGroup];
        gemv_chunk_dots<Fmt, kGroup>(st.raw[s], st.sc[s], xs, d);
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          if (i0 + j < MT && i0 + j < count) acc[i0 + j][s] += d[j];
        }
      }
    }
  };
  __shared__ float partial[WARPS][MT][kSlots];
  constexpr int kUnroll = kIters <= (MT * kMySlots <= 8 ? 8 : 2) ? kIters : 1;
  Stage cur;
  load(0, 0, cur);
#pragma unroll 1
  for (int g = 0; g < groups; ++g) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int s = 0; s < kMySlots; ++s) acc[i][s] = 0.f;
    }
#pragma unroll kUnroll
    for (int it = 0; it < kIters; ++it) {
      compute(it, cur);
      if (it + 1 < kIters) {
        load(g, it + 1, cur);
      } else if (g + 1 < groups) {
        load(g + 1, 0, cur);
      }
    }

    if constexpr (GROUPS == 1) {
      gemv_warp_sums<MT, kSlots>(acc, partial[warp]);
    } else {  // one warp: each group's sums over its lanes, its slots of the CTA's row
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int s = 0; s < kMySlots; ++s) {
          const float v = group_sum<kThreads>(acc[i][s]);
          if (part == 0) partial[0][i][slot0 + s] = v;
        }
      }
    }
    __syncthreads();
    const int out_row0 = group_row0(g);
    for (int t = threadIdx.x; t < MT * ROWS; t += WARPS * kWarpSize) {
      const int i = t / ROWS, r = t % ROWS;
      const int n = out_row0 + r;
      if (i >= count || n >= kOutRows) continue;
      float v = 0.f, gate = 0.f;
#pragma unroll
      for (int wp = 0; wp < WARPS; ++wp) {
        v += partial[wp][i][GATED ? r + ROWS : r];
        if constexpr (GATED) gate += partial[wp][i][r];
      }
      v *= ex.gscale;
      const long long out = static_cast<long long>(pair[i]) * kOutRows + n;
      if constexpr (GATED) {
        v *= silu(gate * ex.gscale);
        static_cast<half_t*>(y)[out] = float_to_half(v);
      } else {
        static_cast<float*>(y)[out] = v;
      }
    }
    if (LOOP > 1) __syncthreads();  // the next group's partial sums overwrite these
  }
}

template <class Fmt, int N, int K, int EXPERTS, int TOPK, int MT, int ROWS, int WARPS, int LOOP, int GROUPS, int OCC,
          bool GATED, bool ACT_ORDER>
__global__ void __launch_bounds__(WARPS* kWarpSize, OCC)
    moe_gemv_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                    const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                    const float* __restrict__ global_scales, const int* __restrict__ offsets,
                    const int* __restrict__ sorted, const int* __restrict__ slot, long long qweight_stride,
                    long long scales_stride, long long zeros_stride) {
  grid_dependency_sync();
  // Tiles of one pair over every expert: tile t is the pair at t in `sorted` (the grid has one
  // tile a pair), so its load goes out before the tile search instead of after it, and the
  // weights' first loads need not wait for it.
  const bool by_index = MT == 1 && slot == nullptr;
  const int indexed = by_index ? sorted[blockIdx.y] : 0;
  const MoeTile tile = moe_find_tile<EXPERTS, MT, WARPS * kWarpSize>(offsets, slot, blockIdx.y);
  if (tile.count == 0) return;
  const MoeExpert ex = moe_expert<K, ACT_ORDER>(tile, qweight, scales, zeros, perm, global_scales, qweight_stride,
                                                scales_stride, zeros_stride);
  int pair[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) pair[i] = i < tile.count ? (by_index ? indexed : sorted[tile.start + i]) : -1;
  moe_gemv_rows<Fmt, N, K, TOPK, MT, ROWS, WARPS, LOOP, GROUPS, GATED, ACT_ORDER>(y, x, ex, pair, tile.count,
                                                                                  blockIdx.x);
}

}  // namespace onecat
