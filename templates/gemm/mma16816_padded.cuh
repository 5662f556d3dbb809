// pipe=1 of the mma strategy with the sm_80+ atom, "padded": shared rows padded by 16 bytes,
// each K step decoded and then multiplied (two barriers per step). The first sm_80+ pipeline;
// pipe=2 (mma16816_swizzled.cuh) replaced it as the default from 512 tokens, where it was
// measured, and for split-K; it stays the default from 17 to 511 tokens (codegen/gemm/space.cpp)
// and a candidate of every sm_80+ bucket.
// mma.sync.m16n8k16 (fp16 in, fp32 accumulate) fed by ldmatrix from shared memory. A CTA
// computes a BM×BN tile of y (tokens × weight rows) with WM×WN warps; K advances in steps of
// BK. The x tile and the raw weight tile of each step arrive by cp.async through STAGES shared
// buffers, so STAGES-1 steps of loads are in flight during the math. fp16 weights are used
// where they land; other formats are decoded once per step from their raw buffer into one of
// two fp16 tiles, with the next step's scales already in registers. The epilogue works on the
// accumulators in registers: the m16n8 layout gives each thread two adjacent outputs of two
// tokens.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/sm80.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/mma16816_loads.cuh"

namespace onecat::padded {

using sm80::cp_async16;
using sm80::cp_async_commit;
using sm80::cp_async_wait;
using sm80::ldmatrix_x4;
using sm80::mma_16816;

// Shared memory of one CTA, in bytes (the launch passes it as dynamic shared memory).
template <class Fmt, int BM, int BN, int BK, int STAGES>
struct Mma16816Smem {
  static constexpr int kLd = BK + 8;  // halves per shared row: 16 bytes of padding spread ldmatrix rows over banks
  static constexpr bool kF16 = IsF16Format<Fmt>::value;
  static constexpr int kChunksPerRow = BK / Fmt::kPerChunk;
  static constexpr int kX = STAGES * BM * kLd * 2;
  static constexpr int kRaw = kF16 ? STAGES * BN * kLd * 2 : STAGES * BN * kChunksPerRow * 16;
  static constexpr int kDecoded = kF16 ? 0 : 2 * BN * kLd * 2;
  static constexpr int kBytes = kX + kRaw + kDecoded;
};

template <class Fmt, int N, int K, int BM, int BN, int BK, int WM, int WN, int STAGES, bool OUT_F32, int EPI, bool ACT_ORDER>
__global__ void __launch_bounds__(WM* WN * 32, 1)
    mma16816_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                    const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                    float global_scale, const half_t* __restrict__ bias, const half_t* __restrict__ residual, int m) {
  grid_dependency_sync();
  using Smem = Mma16816Smem<Fmt, BM, BN, BK, STAGES>;
  constexpr int kThreads = WM * WN * 32;
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kChunksPerStep = BK / kPer;  // per weight row
  constexpr int kLd = Smem::kLd;
  constexpr bool kF16 = Smem::kF16;
  constexpr bool kGated = EPI == kEpiSiluMul;
  constexpr int kOutRows = kGated ? N / 2 : N;
  constexpr int kTileCols = kGated ? BN / 2 : BN;  // output columns per CTA
  constexpr int kWarpM = BM / WM, kWarpN = BN / WN;
  constexpr int kFm = kWarpM / 16, kFn = kWarpN / 8;  // m16 × n8 tiles per warp
  constexpr int kSteps = K / BK;
  static_assert(K % BK == 0 && BK % kPer == 0 && BK % 16 == 0, "K steps of BK in whole chunks");
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "whole ldmatrix tiles per warp");
  static_assert(!kGated || kWarpN % 32 == 0, "gated warps hold whole 16-row gate/up pairs");

  extern __shared__ __align__(128) unsigned char smem[];
  half_t* xs = reinterpret_cast<half_t*>(smem);                        // [STAGES][BM][kLd]
  unsigned char* raw = smem + Smem::kX;                                // [STAGES][BN][kLd] fp16, or raw chunks
  half_t* wdec = reinterpret_cast<half_t*>(smem + Smem::kX + Smem::kRaw);  // [2][BN][kLd]

  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int wm = warp / WN, wn = warp % WN;
  // Token tiles are the fast grid dimension: CTAs launched together share a weight tile,
  // which the L2 then serves to all but the first.
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * kTileCols;

  using Loads = Mma16816Loads<Fmt, N, K, BM, BN, BK, kThreads, EPI, ACT_ORDER>;
  auto issue_step = [&](int kt) {  // loads of step kt into stage kt % STAGES
    const int stage = kt % STAGES;
    half_t* xst = xs + stage * BM * kLd;
    Loads::x_step(x, perm, m, m0, kt, tid, [&](int r, int c) { return &xst[r * kLd + c * 8]; });
    Loads::weight_step(qweight, n0, kt, tid, [&](int r, int c) {
      return kF16 ? shared_address(raw + ((stage * BN + r) * kLd + c * 8) * 2)
                  : shared_address(raw + ((stage * BN + r) * kChunksPerStep + c) * 16);
    });
  };
  typename Loads::Scale sc[Loads::kDecodePerThread];
  auto load_scales = [&](int kt) { Loads::scales_step(sc, scales, zeros, n0, kt, tid); };
  auto decode_step = [&](int kt) {  // raw stage kt % STAGES → fp16 tile kt % 2
    half_t* dst_tile = wdec + (kt % 2) * BN * kLd;
    Loads::decode_stage(sc, raw, kt % STAGES, tid, [&](int r, int c8) { return &dst_tile[r * kLd + c8 * 8]; });
  };

  float acc[kFm][kFn][4];
#pragma unroll
  for (int i = 0; i < kFm; ++i) {
#pragma unroll
    for (int j = 0; j < kFn; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
    }
  }

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kSteps) issue_step(s);
    cp_async_commit();
  }
  load_scales(0);

  // ldmatrix lane addresses: A rows lane%16, k half lane/16; B rows (n) lane%8 + 8*(lane/16),
  // k half (lane/8)%2.
  const int a_row = wm * kWarpM + lane % 16, a_col = (lane / 16) * 8;
  const int b_row = wn * kWarpN + lane % 8 + (lane / 16) * 8, b_col = ((lane / 8) % 2) * 8;

  for (int kt = 0; kt < kSteps; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // step kt has landed for everyone; step kt-1's buffers are free
    if (kt + STAGES - 1 < kSteps) issue_step(kt + STAGES - 1);
    cp_async_commit();
    const half_t* wtile;
    if constexpr (kF16) {
      wtile = reinterpret_cast<const half_t*>(raw) + (kt % STAGES) * BN * kLd;
    } else {
      decode_step(kt);
      if (kt + 1 < kSteps) load_scales(kt + 1);
      __syncthreads();
      wtile = wdec + (kt % 2) * BN * kLd;
    }
    const half_t* xtile = xs + (kt % STAGES) * BM * kLd;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[kFm][4];
#pragma unroll
      for (int i = 0; i < kFm; ++i) ldmatrix_x4(a[i], shared_address(&xtile[(a_row + i * 16) * kLd + kk + a_col]));
#pragma unroll
      for (int j = 0; j < kFn; j += 2) {
        unsigned b[4];
        ldmatrix_x4(b, shared_address(&wtile[(b_row + j * 8) * kLd + kk + b_col]));
#pragma unroll
        for (int i = 0; i < kFm; ++i) {
          mma_16816(acc[i][j], a[i], b[0], b[1]);
          mma_16816(acc[i][j + 1], a[i], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue from registers (the m16n8 layout: two adjacent outputs of two tokens per thread).
  store_mma16816_tile<kFm, kFn, kWarpN, kOutRows, EPI, OUT_F32>(acc, y, m, m0 + wm * kWarpM, n0, wn, lane, global_scale,
                                                               bias, residual);
}

}  // namespace onecat::padded
