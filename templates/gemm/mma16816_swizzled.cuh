// pipe=2 of the mma strategy with the sm_80+ atom, "swizzled": unpadded XOR-swizzled shared
// rows, the decode one step ahead of the math (one barrier per step), split-K. The default from
// 512 tokens and for split-K (codegen/gemm/space.cpp); pipe=1 is mma16816_padded.cuh.
// mma.sync.m16n8k16 (fp16 in, fp32 accumulate) fed by ldmatrix from shared memory. A CTA computes a BM×BN tile of y (tokens ×
// weight rows) with WM×WN warps; K advances in steps of BK. The x tile and the raw weight
// tile of each step arrive by cp.async through STAGES shared buffers, so STAGES-1 steps of
// loads are in flight during the math. fp16 tiles in shared memory have no padding: their
// 16-byte chunks are XOR-swizzled per row (SwizzledTile), so ldmatrix and cp.async touch
// every bank once. fp16 weights are used where they land; other formats are decoded from
// their raw buffer into one of two fp16 tiles one step ahead (step kt+1 during step kt), so
// a K step costs one __syncthreads whatever the format. Fragments are double-buffered in
// registers: the next k16 slice's ldmatrix is issued before this slice's mma. A step's
// cp.async loads (addresses computed once per thread) and its decode are spread over its mma
// groups rather than issued in one stretch, so no warp spends part of a step without tensor
// work (the stretch was ~50 address instructions and 8 LDGSTS before the step's first HMMA in
// the sm_90 SASS; docs/gemm.md). The epilogue
// works on the accumulators in registers: the m16n8 layout gives each thread two adjacent
// outputs of two tokens.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/sm80.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/mma16816_loads.cuh"
#include "gemm/split_k.cuh"

namespace onecat::swizzled {

using sm80::cp_async16;
using sm80::cp_async_commit;
using sm80::cp_async_wait;
using sm80::ldmatrix_x4;
// Not volatile: the compiler may interleave it with the next fragments' ldmatrix.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  sm80::mma_16816<false>(d, a, b0, b1);
}

// An fp16 tile of rows of BK halves in shared memory (x stages, fp16 weight stages, decoded
// weight tiles), unpadded: the 16-byte chunk c of row r is stored at chunk c ^ row_xor(r).
// ldmatrix reads one chunk of 8 consecutive rows, and a warp's cp.async writes whole rows;
// with BK=64 (128-byte rows) row_xor = r % 8 puts 8 consecutive rows' chunk c in 8 different
// 16-byte bank groups, with BK=32 (two 64-byte rows per 128 bytes) row_xor = (r/2) % 4 does.
// row_xor(r + 16) == row_xor(r), so a lane's swizzle is the same for all its 16-row tiles.
template <int BK>
struct SwizzledTile {
  static constexpr int kChunks = BK / 8;
  static_assert(kChunks == 4 || kChunks == 8, "BK is 32 or 64");
  __device__ static __forceinline__ int row_xor(int r) { return kChunks == 8 ? (r & 7) : ((r >> 1) & 3); }
  // Offset in halves of chunk c (8 halves) of row r.
  __device__ static __forceinline__ int offset(int r, int c) { return r * BK + ((c ^ row_xor(r)) << 3); }
};

// Shared memory of one CTA, in bytes (the launch passes it as dynamic shared memory);
// codegen/gemm/config.cpp Config::shared_bytes mirrors it.
template <class Fmt, int BM, int BN, int BK, int STAGES>
struct Mma16816Smem {
  static constexpr bool kF16 = IsF16Format<Fmt>::value;
  static constexpr int kChunksPerRow = BK / Fmt::kPerChunk;
  static constexpr int kX = STAGES * BM * BK * 2;
  static constexpr int kRaw = kF16 ? STAGES * BN * BK * 2 : STAGES * BN * kChunksPerRow * 16;
  static constexpr int kDecoded = kF16 ? 0 : 2 * BN * BK * 2;
  static constexpr int kBytes = kX + kRaw + kDecoded;
};

// SPLIT > 1: blockIdx.z computes one of SPLIT equal parts of K, the parts meet in
// split_k_reduce (gemm/split_k.cuh) through the workspace `partial` / `counters`, which
// launches of SPLIT = 1 do not read.
template <class Fmt, int N, int K, int BM, int BN, int BK, int WM, int WN, int STAGES, int SPLIT, bool OUT_F32, int EPI,
          bool ACT_ORDER>
__global__ void __launch_bounds__(WM* WN * 32, 1)
    mma16816_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                    const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                    float global_scale, const half_t* __restrict__ bias, const half_t* __restrict__ residual, int m,
                    float* __restrict__ partial, unsigned* __restrict__ counters) {
  grid_dependency_sync();
  using Smem = Mma16816Smem<Fmt, BM, BN, BK, STAGES>;
  using Tile = SwizzledTile<BK>;
  constexpr int kThreads = WM * WN * 32;
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kChunksPerStep = BK / kPer;  // per weight row
  constexpr bool kF16 = Smem::kF16;
  constexpr bool kGated = EPI == kEpiSiluMul;
  constexpr int kOutRows = kGated ? N / 2 : N;
  constexpr int kTileCols = kGated ? BN / 2 : BN;  // output columns per CTA
  constexpr int kWarpM = BM / WM, kWarpN = BN / WN;
  constexpr int kFm = kWarpM / 16, kFn = kWarpN / 8;  // m16 × n8 tiles per warp
  constexpr int kJp = kFn / 2;                        // n16 pairs: one ldmatrix.x4 of weights each
  constexpr int kKs = BK / 16;                        // k16 slices per step
  static_assert(SPLIT >= 1 && K % (BK * SPLIT) == 0, "K splits into SPLIT parts of whole steps");
  constexpr int kSteps = K / BK / SPLIT;  // steps of this CTA's part of K
  constexpr int kXStageHalves = BM * BK, kWStageHalves = BN * BK;
  static_assert(K % BK == 0 && BK % kPer == 0 && BK % 16 == 0, "K steps of BK in whole chunks");
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "whole ldmatrix tiles per warp");
  static_assert(!kGated || kWarpN % 32 == 0, "gated warps hold whole 16-row gate/up pairs");
  static_assert(kF16 || STAGES >= 3, "decoded formats need 3 stages: the decode runs one step ahead of the math");
  static_assert(kKs % 2 == 0 && (kKs * kJp) % 2 == 0, "fragment buffer parity restarts every step");

  extern __shared__ __align__(128) unsigned char smem[];
  half_t* xs = reinterpret_cast<half_t*>(smem);                            // [STAGES][BM][BK] swizzled
  unsigned char* raw = smem + Smem::kX;                                    // [STAGES][BN][BK] swizzled fp16, or raw chunks
  half_t* wdec = reinterpret_cast<half_t*>(smem + Smem::kX + Smem::kRaw);  // [2][BN][BK] swizzled

  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int wm = warp / WN, wn = warp % WN;
  // Token tiles are the fast grid dimension: CTAs launched together share a weight tile,
  // which the L2 then serves to all but the first.
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * kTileCols;
  const int kt0 = SPLIT > 1 ? blockIdx.z * kSteps : 0;  // this part's first K step

  using Loads = Mma16816Loads<Fmt, N, K, BM, BN, BK, kThreads, EPI, ACT_ORDER>;
  // This thread's cp.async chunks of a K step, addressed once: source of step 0 and
  // destination in stage 0 (x chunks first, then weight chunks; act-order gathers x apart).
  // Step kt adds kt steps to the source and its stage to the destination. The loads of a
  // step are spread over its first kLoadSlots mma groups (kPerSlot each), so no warp spends
  // a stretch of the step issuing loads while its tensor core work waits.
  constexpr int kXIter = ACT_ORDER ? 0 : (Loads::kXLoads + kThreads - 1) / kThreads;
  constexpr int kWIter = (Loads::kWLoads + kThreads - 1) / kThreads;
  constexpr int kLoads = kXIter + kWIter;
  constexpr int kSlots = kKs * kJp;  // mma groups per step; the last one starts with the barrier
  constexpr int kLoadSlots = kSlots - 1;
  constexpr int kPerSlot = (kLoads + kLoadSlots - 1) / kLoadSlots;
  constexpr unsigned kXStageBytes = kXStageHalves * 2;
  constexpr unsigned kWStageBytes = kF16 ? kWStageHalves * 2 : BN * kChunksPerStep * 16;
  constexpr int kXStepBytes = BK * 2, kWStepBytes = kChunksPerStep * 16;
  static_assert(kSlots >= 2, "a step has at least two mma groups");
  const char* ld_src[kLoads];
  unsigned ld_dst[kLoads];
  int ld_bytes[kLoads];
  bool ld_ok[kLoads];
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    const bool is_x = l < kXIter;
    const int idx = tid + (is_x ? l : l - kXIter) * kThreads;
    const int n_loads = is_x ? Loads::kXLoads : Loads::kWLoads;
    ld_ok[l] = n_loads % kThreads == 0 || idx < n_loads;
    const int i = ld_ok[l] ? idx : 0;
    if (is_x) {
      const int r = i / (BK / 8), c = i % (BK / 8);
      const bool in = m0 + r < m;
      ld_src[l] = reinterpret_cast<const char*>(x + static_cast<long long>(in ? m0 + r : 0) * K + kt0 * BK + c * 8);
      ld_bytes[l] = in ? 16 : 0;
      ld_dst[l] = shared_address(xs + Tile::offset(r, c));
    } else {
      const int r = i / kChunksPerStep, c = i % kChunksPerStep;
      ld_src[l] = static_cast<const char*>(qweight) +
                  (static_cast<long long>(tile_weight_row<N, EPI>(n0, r)) * Loads::kChunksPerRow + kt0 * kChunksPerStep + c) * 16;
      ld_bytes[l] = 16;
      ld_dst[l] = kF16 ? shared_address(reinterpret_cast<half_t*>(raw) + Tile::offset(r, c))
                       : shared_address(raw + (r * kChunksPerStep + c) * 16);
    }
  }
  auto issue_part = [&](int kt, int part) {  // part: a compile-time constant once unrolled
    const int stage = kt % STAGES;
#pragma unroll
    for (int q = 0; q < kPerSlot; ++q) {
      const int l = part * kPerSlot + q;
      if (l < kLoads && ld_ok[l]) {
        const bool is_x = l < kXIter;
        sm80::cp_async16(ld_dst[l] + stage * (is_x ? kXStageBytes : kWStageBytes),
                         ld_src[l] + static_cast<long long>(kt) * (is_x ? kXStepBytes : kWStepBytes), ld_bytes[l]);
      }
    }
    if constexpr (ACT_ORDER) {
      if (part == 0) {
        half_t* xst = xs + stage * kXStageHalves;
        Loads::x_step(x, perm, m, m0, kt0 + kt, tid, [&](int r, int c) { return xst + Tile::offset(r, c); });
      }
    }
  };
  auto issue_step = [&](int kt) {  // all loads of step kt into stage kt % STAGES
#pragma unroll
    for (int part = 0; part < kLoadSlots; ++part) issue_part(kt, part);
  };
  typename Loads::Scale sc[Loads::kDecodePerThread];
  auto load_scales = [&](int kt) { Loads::scales_step(sc, scales, zeros, n0, kt0 + kt, tid); };
  auto decoded_tile = [&](int kt) {
    half_t* dst_tile = wdec + (kt % 2) * kWStageHalves;
    return [dst_tile](int r, int c8) { return dst_tile + Tile::offset(r, c8); };
  };
  auto decode_step = [&](int kt) {  // raw stage kt % STAGES → fp16 tile kt % 2
    if constexpr (!kF16) Loads::decode_stage(sc, raw, kt % STAGES, tid, decoded_tile(kt));
  };
  // In the loop the decode of step kt+1 is split: its raw chunks are read from shared memory
  // in the first mma group, decoded and stored in the second (the first, for two-group steps),
  // and the scales of step kt+2 requested after that.
  constexpr int kDecodeStoreSlot = kSlots >= 3 ? 1 : 0;
  Raw16 rv[kF16 ? 1 : Loads::kDecodePerThread];

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
  if constexpr (!kF16) {  // step 0's weights decoded before the loop; the loop decodes one ahead
    load_scales(0);
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    decode_step(0);
    if (kSteps > 1) load_scales(1);
  }
  // Step 0's x (and fp16 weights), its decoded tile and step 1's raw weights are visible.
  if constexpr (kF16) {
    cp_async_wait<STAGES - 2>();
  } else {
    cp_async_wait<STAGES - 3>();
  }
  __syncthreads();

  // ldmatrix lane addresses. A (x, row-major m16×k16): rows lane%16, k chunk lane/16. B
  // (weights, n rows × k): rows lane%8 + 8*(lane/16), k chunk (lane/8)%2. A lane's chunk in
  // k16 slice ks is 2*ks + its chunk, swizzled: (2*ks) ^ (chunk ^ row_xor(row)), since the
  // chunk is 0 or 1 and 2*ks even.
  const int a_row = wm * kWarpM + lane % 16;
  const int b_row = wn * kWarpN + lane % 8 + (lane / 16) * 8;
  const int a_sw = (lane / 16) ^ Tile::row_xor(a_row);
  const int b_sw = ((lane / 8) % 2) ^ Tile::row_xor(b_row);
  const unsigned xs_lane = shared_address(xs) + a_row * BK * 2;
  const unsigned w_lane = (kF16 ? shared_address(raw) : shared_address(wdec)) + b_row * BK * 2;
  auto x_addr = [&](int kt) { return xs_lane + (kt % STAGES) * (kXStageHalves * 2); };
  auto w_addr = [&](int kt) { return w_lane + (kF16 ? kt % STAGES : kt % 2) * (kWStageHalves * 2); };
  auto load_a = [&](unsigned(&f)[kFm][4], unsigned xa, int ks) {
#pragma unroll
    for (int i = 0; i < kFm; ++i) ldmatrix_x4(f[i], xa + i * 16 * BK * 2 + (((2 * ks) ^ a_sw) << 4));
  };
  auto load_b = [&](unsigned(&f)[4], unsigned wa, int ks, int jp) {
    ldmatrix_x4(f, wa + jp * 16 * BK * 2 + (((2 * ks) ^ b_sw) << 4));
  };

  // Fragments of two k16 slices in registers: slice g+1's are requested before slice g's
  // mma, across steps too (kKs and kKs*kJp are even, so the buffer parity restarts each step).
  unsigned a[2][kFm][4];
  unsigned b[2][4];
  load_a(a[0], x_addr(0), 0);
  load_b(b[0], w_addr(0), 0, 0);
  for (int kt = 0; kt < kSteps; ++kt) {
    const bool more = kt + 1 < kSteps;
    const unsigned xa = x_addr(kt), wa = w_addr(kt);
    const unsigned xa_next = x_addr(kt + 1), wa_next = w_addr(kt + 1);
#pragma unroll
    for (int ks = 0; ks < kKs; ++ks) {
#pragma unroll
      for (int jp = 0; jp < kJp; ++jp) {
        const int t = ks * kJp + jp;
        if (t == kSlots - 1) {
          // This step's fragments are all in registers (the last n16 pair's weights were
          // requested in the previous group; a barrier at the start of the last slice would
          // let other warps refill the stage while pairs 1.. of that slice are still read).
          // Step kt+STAGES-1's loads, issued in the groups before, form one group. After
          // this barrier step kt+1's x (and fp16 weights) and its decoded tile are visible
          // (decoded formats: step kt+2's raw weights too), and every warp has read its last
          // fragment of step kt's stage and decoded tile.
          cp_async_commit();
          if constexpr (kF16) {
            cp_async_wait<STAGES - 2>();
          } else {
            cp_async_wait<STAGES - 3>();
          }
          __syncthreads();
        }
        if (jp == 0 && ks + 1 < kKs) {
          load_a(a[(ks + 1) % 2], xa, ks + 1);
        } else if (jp == kJp - 1 && ks + 1 == kKs && more) {
          load_a(a[(ks + 1) % 2], xa_next, 0);  // after the barrier: step kt+1's x
        }
        if (jp + 1 < kJp) {
          load_b(b[(t + 1) % 2], wa, ks, jp + 1);
        } else if (ks + 1 < kKs) {
          load_b(b[(t + 1) % 2], wa, ks + 1, 0);
        } else if (more) {
          load_b(b[(t + 1) % 2], wa_next, 0, 0);
        }
        // Step kt-1's stage was last read before the previous barrier: refill it, a part per
        // group. Its decoded tile too: decode step kt+1 into it (raw weights visible since
        // that barrier).
        if (t < kLoadSlots && kt + STAGES - 1 < kSteps) issue_part(kt + STAGES - 1, t);
        if constexpr (!kF16) {
          if (more) {
            if (t == 0) {
#pragma unroll
              for (int i = 0; i < Loads::kDecodePerThread; ++i) rv[i] = Loads::read_raw(raw, (kt + 1) % STAGES, tid, i);
            }
            if (t == kDecodeStoreSlot) {
              auto dst = decoded_tile(kt + 1);
#pragma unroll
              for (int i = 0; i < Loads::kDecodePerThread; ++i) Loads::decode_store(rv[i], sc[i], tid, i, dst);
              if (kt + 2 < kSteps) load_scales(kt + 2);
            }
          }
        }
#pragma unroll
        for (int i = 0; i < kFm; ++i) {
          mma_16816(acc[i][2 * jp], a[ks % 2][i], b[t % 2][0], b[t % 2][1]);
          mma_16816(acc[i][2 * jp + 1], a[ks % 2][i], b[t % 2][2], b[t % 2][3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  if constexpr (SPLIT > 1) {
    auto ref = [&](int a) -> float& { return acc[a / (kFn * 4)][(a / 4) % kFn][a % 4]; };
    if (!split_k_reduce<SPLIT, kFm * kFn * 4, kThreads>(ref, partial, counters)) return;
  }

  // Epilogue from registers (the m16n8 layout: two adjacent outputs of two tokens per thread).
  store_mma16816_tile<kFm, kFn, kWarpN, kOutRows, EPI, OUT_F32>(acc, y, m, m0 + wm * kWarpM, n0, wn, lane, global_scale,
                                                               bias, residual);
}

}  // namespace onecat::swizzled
