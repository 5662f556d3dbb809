// mma strategy of the gemm family, for larger M: tensor-core tiles.
// A CTA computes a BM×BN tile of y (tokens × weight rows) with WM×WN warps; K advances in
// steps of BK = 32. Each step's x tile and weight tile go global → registers → shared memory,
// the weights decoded to fp16 in registers on the way (Volta has no cp.async, so the next
// step's loads are issued before this step's math: register double buffering, two shared
// buffers). The matrix instruction is the WMMA atom (common/wmma_atom.cuh: m16n16k16, fp16 in,
// fp32 accumulate; Volta's HMMA.884 on sm_70, HMMA.16816 on sm_80+).
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/wmma_atom.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/split_k.cuh"

namespace onecat {

inline constexpr int kMmaBk = 32;
inline constexpr int kMmaPad = 8;  // halves of padding per shared row: spreads rows over banks

// One CTA's BM×BN tile, shared with the moe family's grouped kernel (templates/moe/mma.cuh):
// x_row(r) is tile row r's x row for r < rows (later rows read zeros), the weights start at
// qweight/scales/zeros, n0 is the tile's first output column, and store(r, n, v) takes each
// finished output (global scale and gating applied) of a tile row r < rows and column n < the
// output width.
// SPLIT > 1: blockIdx.z computes one of SPLIT equal parts of K, the parts meet in
// split_k_reduce (gemm/split_k.cuh) through the workspace `partial` / `counters`, which
// launches of SPLIT = 1 do not read.
template <class Fmt, int N, int K, int BM, int BN, int WM, int WN, int SPLIT, int EPI, bool ACT_ORDER, class XRow,
          class Store>
__device__ __forceinline__ void mma_tile(const XRow& x_row, int rows, const void* __restrict__ qweight,
                                         const void* __restrict__ scales, const void* __restrict__ zeros,
                                         const int* __restrict__ perm, float global_scale, int n0,
                                         float* __restrict__ partial, unsigned* __restrict__ counters,
                                         const Store& store) {
  constexpr int kThreads = WM * WN * 32;
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kChunksPerRow = K / kPer;
  constexpr int kChunksPerTile = kMmaBk / kPer;  // per weight row and k step
  constexpr int kLd = kMmaBk + kMmaPad;
  constexpr bool kGated = EPI == kEpiSiluMul;
  constexpr int kOutRows = kGated ? N / 2 : N;
  constexpr int kXLoads = BM * kMmaBk / 8;  // 16-byte loads of x per step
  constexpr int kWLoads = BN * kChunksPerTile;
  constexpr int kXPerThread = (kXLoads + kThreads - 1) / kThreads;
  constexpr int kWPerThread = (kWLoads + kThreads - 1) / kThreads;
  constexpr int kFm = BM / WM / 16, kFn = BN / WN / 16;
  static_assert(K % kMmaBk == 0 && kMmaBk % kPer == 0, "K steps of 32 in whole chunks");

  // wmma.load wants 32-byte aligned fragment rows: kLd * 2 * 16 and 16 * 2 bytes are.
  constexpr int kXsBytes = 2 * BM * kLd * 2, kWsBytes = 2 * BN * kLd * 2;
  __shared__ __align__(128) unsigned char smem[kXsBytes + kWsBytes];
  auto xs = reinterpret_cast<half_t(*)[BM][kLd]>(smem);
  auto ws = reinterpret_cast<half_t(*)[BN][kLd]>(smem + kXsBytes);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int wm = warp / WN, wn = warp % WN;

  auto weight_row = [&](int r) { return tile_weight_row<N, EPI>(n0, r); };

  Raw16 xr[kXPerThread];
  Raw16 wr[kWPerThread];
  typename Fmt::Scale wsc[kWPerThread];
  auto load_step = [&](int kt) {
#pragma unroll
    for (int i = 0; i < kXPerThread; ++i) {
      const int idx = tid + i * kThreads;
      const int r = idx / (kMmaBk / 8), c = idx % (kMmaBk / 8);
      Raw16 v{};
      if (idx < kXLoads && r < rows) {
        const half_t* row = x_row(r);
        if constexpr (ACT_ORDER) {
#pragma unroll
          for (int j = 0; j < 8; ++j) v.h[j] = row[perm[kt * kMmaBk + c * 8 + j]].bits;
        } else {
          v = gmem_load_nc<16>(row + kt * kMmaBk + c * 8);
        }
      }
      xr[i] = v;
    }
#pragma unroll
    for (int i = 0; i < kWPerThread; ++i) {
      const int idx = tid + i * kThreads;
      const int r = idx / kChunksPerTile, c = kt * kChunksPerTile + idx % kChunksPerTile;
      if (idx < kWLoads) {
        const int row = weight_row(r);
        wr[i] = gmem_load_nc<16>(static_cast<const char*>(qweight) + (static_cast<long long>(row) * kChunksPerRow + c) * 16);
        wsc[i] = Fmt::load_scale(scales, zeros, row, c);
      }
    }
  };
  auto store_step = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kXPerThread; ++i) {
      const int idx = tid + i * kThreads;
      if (idx < kXLoads) *reinterpret_cast<Raw16*>(&xs[buf][idx / (kMmaBk / 8)][(idx % (kMmaBk / 8)) * 8]) = xr[i];
    }
#pragma unroll
    for (int i = 0; i < kWPerThread; ++i) {
      const int idx = tid + i * kThreads;
      if (idx < kWLoads) {
        half2_t d[kPer / 2];
        decode_chunk_full<Fmt>(wr[i], wsc[i], d);
        half2_t* dst = reinterpret_cast<half2_t*>(&ws[buf][idx / kChunksPerTile][(idx % kChunksPerTile) * kPer]);
#pragma unroll
        for (int p = 0; p < kPer / 2; ++p) dst[p] = d[p];
      }
    }
  };

  wmma::Acc acc[kFm][kFn];
#pragma unroll
  for (int i = 0; i < kFm; ++i) {
#pragma unroll
    for (int j = 0; j < kFn; ++j) wmma::zero(acc[i][j]);
  }

  static_assert(SPLIT >= 1 && K % (kMmaBk * SPLIT) == 0, "K splits into SPLIT parts of whole steps");
  constexpr int kSteps = K / kMmaBk / SPLIT;  // steps of this CTA's part of K
  const int kt0 = SPLIT > 1 ? blockIdx.z * kSteps : 0;
  const int kt_end = kt0 + kSteps;
  load_step(kt0);
  store_step(0);
  __syncthreads();
  for (int kt = kt0; kt < kt_end; ++kt) {
    const int buf = (kt - kt0) & 1;
    if (kt + 1 < kt_end) load_step(kt + 1);  // in flight during this step's math
#pragma unroll
    for (int kk = 0; kk < kMmaBk; kk += 16) {
      // The warp's weight fragments once per half-step, each x fragment once: every
      // operand is read from shared memory once.
      wmma::Frag b[kFn];
#pragma unroll
      for (int j = 0; j < kFn; ++j) wmma::load_b<wmma::Layout::kCol>(b[j], &ws[buf][(wn * kFn + j) * 16][kk], kLd);
#pragma unroll
      for (int i = 0; i < kFm; ++i) {
        wmma::Frag a;
        wmma::load_a(a, &xs[buf][(wm * kFm + i) * 16][kk], kLd);
#pragma unroll
        for (int j = 0; j < kFn; ++j) wmma::mma<wmma::Layout::kCol>(acc[i][j], a, b[j]);
      }
    }
    if (kt + 1 < kt_end) store_step(buf ^ 1);
    __syncthreads();
  }
  if constexpr (SPLIT > 1) {
    auto ref = [&](int a) -> float& { return acc[a / (kFn * 8)][(a / 8) % kFn].v[a % 8]; };
    if (!split_k_reduce<SPLIT, kFm * kFn * 8, kThreads>(ref, partial, counters)) return;
  }

  // Epilogue: each warp passes its accumulators through its own 16×16 (×2 when gated)
  // corner of the now idle shared buffers (the fragment layout is opaque), then its lanes
  // finish whole output elements.
  constexpr int kStageFloats = (kGated ? 2 : 1) * 256;
  static_assert(kXsBytes + kWsBytes >= int(sizeof(float)) * kStageFloats * WM * WN, "staging fits");
  float* stage = reinterpret_cast<float*>(smem) + warp * kStageFloats;
  const int lane = tid % 32;
#pragma unroll
  for (int i = 0; i < kFm; ++i) {
#pragma unroll
    for (int j = 0; j < kFn; j += kGated ? 2 : 1) {
      wmma::store_acc(stage, 16, acc[i][j]);
      if constexpr (kGated) wmma::store_acc(stage + 256, 16, acc[i][j + 1]);
      __syncwarp();
      const int tile_col = kGated ? ((wn * kFn + j) / 2) * 16 : (wn * kFn + j) * 16;
#pragma unroll
      for (int e = lane; e < 256; e += 32) {
        const int r = (wm * kFm + i) * 16 + e / 16, n = n0 + tile_col + e % 16;
        if (r >= rows || n >= kOutRows) continue;
        float v = stage[kGated ? 256 + e : e] * global_scale;
        if constexpr (kGated) v *= silu(stage[e] * global_scale);
        store(r, n, v);
      }
      __syncwarp();
    }
  }
}

template <class Fmt, int N, int K, int BM, int BN, int WM, int WN, int SPLIT, bool OUT_F32, int EPI, bool ACT_ORDER>
__global__ void __launch_bounds__(WM* WN * 32, 1)
    mma_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
               const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
               float global_scale, const half_t* __restrict__ bias, const half_t* __restrict__ residual, int m,
               float* __restrict__ partial, unsigned* __restrict__ counters) {
  grid_dependency_sync();
  constexpr int kOutRows = EPI == kEpiSiluMul ? N / 2 : N;
  // A gated CTA covers BN/2 output columns: its tile rows alternate 16 gate rows and the
  // 16 matching up rows, so each warp holds both halves of its outputs.
  constexpr int kTileCols = EPI == kEpiSiluMul ? BN / 2 : BN;
  // Token tiles are the fast grid dimension: CTAs launched together share a weight tile,
  // which the L2 then serves to all but the first.
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * kTileCols;  // first output column of the tile
  mma_tile<Fmt, N, K, BM, BN, WM, WN, SPLIT, EPI, ACT_ORDER>(
      [&](int r) { return x + static_cast<long long>(m0 + r) * K; }, m - m0, qweight, scales, zeros, perm,
      global_scale, n0, partial, counters, [&](int r, int n, float v) {
        const long long out = static_cast<long long>(m0 + r) * kOutRows + n;
        if constexpr (EPI == kEpiBias) v += half_to_float(bias[n]);
        if constexpr (EPI == kEpiResidual) v += half_to_float(residual[out]);
        store_out<OUT_F32>(y, out, v);
      });
}

}  // namespace onecat
