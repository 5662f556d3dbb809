// mma strategy of the gemm family, for larger M: tensor-core tiles.
// A CTA computes a BM×BN tile of y (tokens × weight rows) with WM×WN warps; K advances in
// steps of BK = 32. Each step's x tile and weight tile go global → registers → shared memory,
// the weights decoded to fp16 in registers on the way (Volta has no cp.async, so the next
// step's loads are issued before this step's math: register double buffering, two shared
// buffers). The matrix instruction is WMMA m16n16k16 (fp16 in, fp32 accumulate), written in
// PTX: on sm_70 it is Volta's HMMA.884 sequence, on sm_80+ HMMA.16816.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/split_k.cuh"

namespace onecat {

inline constexpr int kMmaBk = 32;
inline constexpr int kMmaPad = 8;  // halves of padding per shared row: spreads rows over banks

struct WmmaAcc {
  float v[8];
};

struct WmmaFrag {
  unsigned r[8];  // 16 fp16 values; their placement is the instruction's business
};

// Operands come from shared memory (generic addresses); a is 16×16 row-major with stride
// lda, b is 16×16 column-major (weight rows, k contiguous) with stride ldb, in elements.
__device__ __forceinline__ void wmma_load_a(WmmaFrag& f, const half_t* a, int lda) {
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]), "=r"(f.r[6]),
                 "=r"(f.r[7])
               : "l"(a), "r"(lda));
}

__device__ __forceinline__ void wmma_load_b(WmmaFrag& f, const half_t* b, int ldb) {
  asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]), "=r"(f.r[6]),
                 "=r"(f.r[7])
               : "l"(b), "r"(ldb));
}

// acc += a · b, fp16 operands, fp32 accumulators.
__device__ __forceinline__ void wmma_mma(WmmaAcc& acc, const WmmaFrag& a, const WmmaFrag& b) {
  asm volatile(
      "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "
      "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, {%0,%1,%2,%3,%4,%5,%6,%7};"
      : "+f"(acc.v[0]), "+f"(acc.v[1]), "+f"(acc.v[2]), "+f"(acc.v[3]), "+f"(acc.v[4]), "+f"(acc.v[5]),
        "+f"(acc.v[6]), "+f"(acc.v[7])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(a.r[4]), "r"(a.r[5]), "r"(a.r[6]), "r"(a.r[7]),
        "r"(b.r[0]), "r"(b.r[1]), "r"(b.r[2]), "r"(b.r[3]), "r"(b.r[4]), "r"(b.r[5]), "r"(b.r[6]), "r"(b.r[7]));
}

__device__ __forceinline__ void wmma_store_16x16(float* d, int ldd, const WmmaAcc& acc) {
  asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8}, %9;" ::"l"(d),
               "f"(acc.v[0]), "f"(acc.v[1]), "f"(acc.v[2]), "f"(acc.v[3]), "f"(acc.v[4]), "f"(acc.v[5]),
               "f"(acc.v[6]), "f"(acc.v[7]), "r"(ldd)
               : "memory");
}

// SPLIT > 1: blockIdx.z computes one of SPLIT equal parts of K, the parts meet in
// split_k_reduce (gemm/split_k.cuh) through the workspace `partial` / `counters`, which
// launches of SPLIT = 1 do not read.
template <class Fmt, int N, int K, int BM, int BN, int WM, int WN, int SPLIT, bool OUT_F32, int EPI, bool ACT_ORDER>
__global__ void __launch_bounds__(WM* WN * 32, 1)
    mma_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
               const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
               float global_scale, const half_t* __restrict__ bias, const half_t* __restrict__ residual, int m,
               float* __restrict__ partial, unsigned* __restrict__ counters) {
  constexpr int kThreads = WM * WN * 32;
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kChunksPerRow = K / kPer;
  constexpr int kChunksPerTile = kMmaBk / kPer;  // per weight row and k step
  constexpr int kLd = kMmaBk + kMmaPad;
  constexpr bool kGated = EPI == kEpiSiluMul;
  constexpr int kOutRows = kGated ? N / 2 : N;
  // A gated CTA covers BN/2 output columns: its tile rows alternate 16 gate rows and the
  // 16 matching up rows, so each warp holds both halves of its outputs.
  constexpr int kTileCols = kGated ? BN / 2 : BN;
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
  // Token tiles are the fast grid dimension: CTAs launched together share a weight tile,
  // which the L2 then serves to all but the first.
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * kTileCols;  // first output column of the tile

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
      if (idx < kXLoads && m0 + r < m) {
        const half_t* row = x + static_cast<long long>(m0 + r) * K;
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

  WmmaAcc acc[kFm][kFn];
#pragma unroll
  for (int i = 0; i < kFm; ++i) {
#pragma unroll
    for (int j = 0; j < kFn; ++j) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[i][j].v[e] = 0.f;
    }
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
      WmmaFrag b[kFn];
#pragma unroll
      for (int j = 0; j < kFn; ++j) wmma_load_b(b[j], &ws[buf][(wn * kFn + j) * 16][kk], kLd);
#pragma unroll
      for (int i = 0; i < kFm; ++i) {
        WmmaFrag a;
        wmma_load_a(a, &xs[buf][(wm * kFm + i) * 16][kk], kLd);
#pragma unroll
        for (int j = 0; j < kFn; ++j) wmma_mma(acc[i][j], a, b[j]);
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
      wmma_store_16x16(stage, 16, acc[i][j]);
      if constexpr (kGated) wmma_store_16x16(stage + 256, 16, acc[i][j + 1]);
      __syncwarp();
      const int tile_col = kGated ? ((wn * kFn + j) / 2) * 16 : (wn * kFn + j) * 16;
#pragma unroll
      for (int e = lane; e < 256; e += 32) {
        const int tok = m0 + (wm * kFm + i) * 16 + e / 16, n = n0 + tile_col + e % 16;
        if (tok >= m || n >= kOutRows) continue;
        float v = stage[kGated ? 256 + e : e] * global_scale;
        const long long out = static_cast<long long>(tok) * kOutRows + n;
        if constexpr (kGated) v *= silu(stage[e] * global_scale);
        if constexpr (EPI == kEpiBias) v += half_to_float(bias[n]);
        if constexpr (EPI == kEpiResidual) v += half_to_float(residual[out]);
        store_out<OUT_F32>(y, out, v);
      }
      __syncwarp();
    }
  }
}

}  // namespace onecat
