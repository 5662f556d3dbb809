// tc_small strategy of the gemm family, for decode-size M (≤ 16 tokens per CTA) on sm_80+:
// y[M,N] = x[M,K] · W[N,K]^T on mma.sync.m16n8k16 with the operands swapped (W is the
// 16-row A operand, x the 8-column B operand), so one instruction covers 16 weight rows × 8
// tokens and M=1..8 wastes no weight decode. The body is tc_small_tile, which the moe
// family's tc_small strategy runs on the tiles of an expert's pairs (templates/moe/tc_small.cuh).
//
// A CTA of WARPS warps owns ROWS output rows (2·ROWS weight rows for silu_mul: 16 gate rows,
// then the matching 16 up rows, tile_weight_row) and MT tokens (8 or 16, blockIdx.y); its
// warps split K (warp w takes k-blocks w, w + WARPS, …) and meet in shared memory in fp32.
// A k-block is four consecutive 16-byte chunks of a weight row, one per lane of a quad
// (lane = 4·g + t: rows g and g+8 of each 16-row tile, chunk 4·kb + t). The weights stay in
// the common packed layout: a dot product does not care in which order k is summed, so lane
// t feeds the mma's k slots {2t, 2t+1, 2t+8, 2t+9} of step j with k = chunk·kPer + 4j + {0..3}
// of its own chunk, and reads x at the same k (one 8-byte piece per step). Weight chunks move
// as whole 16 bytes: with STAGES=1 one ld.global.nc straight into registers, loaded one
// k-block ahead (register double buffering); with STAGES ≥ 2 by cp.async into a ring of
// STAGES slots private to each thread in shared memory, STAGES-1 k-blocks ahead: no
// registers held for loads in flight, and no barrier (a thread reads only its own copies).
// Scales and x are loaded into registers one k-block ahead. Chunks decode in registers
// straight into A fragments.
//
// SPLIT > 1 (split-K across CTAs, for narrow N): blockIdx.z takes one of SPLIT equal runs of
// k-blocks, so wide row tiles, which read x from L2 once per `rows` weight rows, still make
// enough CTAs; the CTAs of a tile meet in split_k_reduce (gemm/split_k.cuh) after their
// warps have, and the last one runs the epilogue.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/reduce.cuh"
#include "common/sm80.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/split_k.cuh"

namespace onecat {

// The weights are never written by a kernel of a forward pass: the warp's first k-blocks of
// the tile at n0, kb0 and their scales (and zeros) are asked into L2 before the wait for the
// kernel before this one (common/grid.cuh; sm_90+).
template <class Fmt, int N, int K, int ROWS, int WARPS, int STAGES, int SPLIT, int EPI>
__device__ __forceinline__ void tc_small_prefetch(const void* __restrict__ qweight, const void* __restrict__ scales,
                                                  const void* __restrict__ zeros, int n0, int kb0) {
  constexpr int kChunks = K / Fmt::kPerChunk;
  constexpr int kPartBlocks = (kChunks + 3) / 4 / SPLIT;
  constexpr int kTiles = (EPI == kEpiSiluMul ? 2 * ROWS : ROWS) / 16;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const char* wbytes = static_cast<const char*>(qweight);
#pragma unroll
  for (int j = 0; j < (STAGES < 2 ? 1 : 2); ++j) {
    const int kb = kb0 + warp + j * WARPS;
    const int c = min(kb * 4 + t, kChunks - 1);
    if (kb >= kb0 + kPartBlocks) break;
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = tile_weight_row<N, EPI>(n0, i * 16 + g + 8 * h);
        grid_dependency_prefetch_l2(wbytes + static_cast<long long>(row) * kChunks * 16 + c * 16);
        Fmt::prefetch_scale(scales, zeros, row, c);
      }
    }
  }
}

// One CTA's tile: ROWS output rows from n0 for up to MT tokens, xrow_of(j) the x row of token
// j < count (the others read as zeros), over this CTA's k-blocks from kb0; store(j, n, v) gets
// each finished (token, row) value with the global scale and silu_mul applied (the caller adds
// its epilogue). The caller has waited for the kernel before this one (grid_dependency_sync).
template <class Fmt, int N, int K, int MT, int ROWS, int WARPS, int STAGES, int SPLIT, int EPI, bool ACT_ORDER,
          class XRowOf, class Store>
__device__ __forceinline__ void tc_small_tile(XRowOf xrow_of, int count, const void* __restrict__ qweight,
                                              const void* __restrict__ scales, const void* __restrict__ zeros,
                                              const int* __restrict__ perm, float global_scale, int n0, int kb0,
                                              float* __restrict__ partial_out, unsigned* __restrict__ counters,
                                              Store store) {
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kPairs = kPer / 2;
  constexpr int kChunks = K / kPer;
  constexpr int kBlocks = (kChunks + 3) / 4;  // k-blocks of four chunks (the last may be partial)
  constexpr bool kGated = EPI == kEpiSiluMul;
  constexpr int kOutRows = kGated ? N / 2 : N;
  constexpr int kTiles = (kGated ? 2 * ROWS : ROWS) / 16;  // 16-row weight tiles (mma A operands)
  constexpr int kTokGroups = MT / 8;                       // 8-token mma B operands
  constexpr int kXLoads = kPer / 8;                        // 16-byte x pieces per token per chunk
  constexpr int kAcc = kTiles * kTokGroups * 4;
  // A row's scale is the same over a whole k-block (int4 group 128, fp8b128): the mma sums
  // unscaled weights (exact small integers for int4) and the fp32 scale multiplies the
  // k-block's partial sums, instead of an fp16 multiply per weight pair.
  constexpr bool kBlockScaled = Fmt::kScaleSpanK > 0 && Fmt::kScaleSpanK % (4 * kPer) == 0;
  static_assert(K % kPer == 0 && kPer % 8 == 0, "whole 16-byte chunks of k");
  static_assert(ROWS % 16 == 0 && (MT == 8 || MT == 16), "16-row tiles, 8 or 16 tokens");
  static_assert(kBlocks % SPLIT == 0 && kBlocks / SPLIT >= WARPS, "every warp has a k-block in every split part");
  constexpr int kPartBlocks = kBlocks / SPLIT;  // k-blocks of this CTA: kb0 .. kb0 + kPartBlocks - 1
  static_assert(STAGES >= 1 && STAGES <= 4, "1 (registers) to 4 (cp.async ring) stages");

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;

  const char* wbytes = static_cast<const char*>(qweight);
  long long wrow[kTiles][2];  // byte offset of the lane's weight rows g and g+8 of each tile
  int srow[kTiles][2];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      srow[i][h] = tile_weight_row<N, EPI>(n0, i * 16 + g + 8 * h);  // clamped: loads stay in bounds
      wrow[i][h] = static_cast<long long>(srow[i][h]) * kChunks * 16;
    }
  }
  const half_t* xrow[kTokGroups];
  bool xin[kTokGroups];
#pragma unroll
  for (int h = 0; h < kTokGroups; ++h) {
    const int j = h * 8 + g;
    xin[h] = j < count;
    xrow[h] = xrow_of(xin[h] ? j : 0);
  }

  struct Stage {
    Raw16 w[kTiles][2];
    typename Fmt::Scale sc[kTiles][2];
    Raw16 xv[kTokGroups][kXLoads];
  };
  auto load = [&](int kb, Stage& s) {
    const int c = kb * 4 + t;
    const bool in = kChunks % 4 == 0 || c < kChunks;  // lanes past the last chunk load a real one and zero it
    const int cc = in ? c : kChunks - 1;
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (STAGES == 1) {
          s.w[i][h] = gmem_load_nc<16>(wbytes + wrow[i][h] + cc * 16);
          const unsigned keep = in ? 0xffffffffu : 0u;
#pragma unroll
          for (int j = 0; j < 4; ++j) reinterpret_cast<unsigned*>(s.w[i][h].h)[j] &= keep;
        }
        s.sc[i][h] = Fmt::load_scale(scales, zeros, srow[i][h], cc);
      }
    }
#pragma unroll
    for (int h = 0; h < kTokGroups; ++h) {
#pragma unroll
      for (int q = 0; q < kXLoads; ++q) {
        if constexpr (ACT_ORDER) {
          Raw16 v{};
#pragma unroll
          for (int j = 0; j < 8; ++j) v.h[j] = xrow[h][perm[cc * kPer + q * 8 + j]].bits;
          s.xv[h][q] = v;
        } else {
          s.xv[h][q] = gmem_load_nc<16>(xrow[h] + cc * kPer + q * 8);
        }
        // Tokens past m and chunks past K read as zeros (AND per word, not a select per half).
        const unsigned keep = in && xin[h] ? 0xffffffffu : 0u;
#pragma unroll
        for (int j = 0; j < 4; ++j) reinterpret_cast<unsigned*>(s.xv[h][q].h)[j] &= keep;
      }
    }
  };

  float acc[kTiles][kTokGroups][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int h = 0; h < kTokGroups; ++h) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][h][e] = 0.f;
    }
  }
  auto compute = [&](const Stage& s) {
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
      half2_t lo[kPairs], hi[kPairs];  // rows g and g+8
      if constexpr (kBlockScaled) {
#pragma unroll
        for (int p = 0; p < kPairs; ++p) {
          lo[p] = Fmt::decode_unscaled(s.w[i][0], p, s.sc[i][0]);
          hi[p] = Fmt::decode_unscaled(s.w[i][1], p, s.sc[i][1]);
        }
      } else {
        decode_chunk_full<Fmt>(s.w[i][0], s.sc[i][0], lo);
        decode_chunk_full<Fmt>(s.w[i][1], s.sc[i][1], hi);
      }
      auto mmas = [&](float (&sum)[kTokGroups][4]) {
#pragma unroll
        for (int j = 0; j < kPer / 4; ++j) {
#pragma unroll
          for (int h = 0; h < kTokGroups; ++h) {
            const unsigned b0 = raw_word(s.xv[h][j / 2], (2 * j) % 4);
            const unsigned b1 = raw_word(s.xv[h][j / 2], (2 * j + 1) % 4);
            sm80::mma_16816(sum[h], lo[2 * j].bits, hi[2 * j].bits, lo[2 * j + 1].bits, hi[2 * j + 1].bits, b0, b1);
          }
        }
      };
      if constexpr (kBlockScaled) {
        float part[kTokGroups][4];
#pragma unroll
        for (int h = 0; h < kTokGroups; ++h) {
#pragma unroll
          for (int e = 0; e < 4; ++e) part[h][e] = 0.f;
        }
        mmas(part);
        // d0, d1 are the lane's row g, d2, d3 its row g+8: the rows whose scales it loaded.
        const float s_lo = Fmt::block_scale(s.sc[i][0]), s_hi = Fmt::block_scale(s.sc[i][1]);
#pragma unroll
        for (int h = 0; h < kTokGroups; ++h) {
          acc[i][h][0] += s_lo * part[h][0];
          acc[i][h][1] += s_lo * part[h][1];
          acc[i][h][2] += s_hi * part[h][2];
          acc[i][h][3] += s_hi * part[h][3];
        }
      } else {
        mmas(acc[i]);
      }
    }
  };

  // One shared buffer: first the weight ring (STAGES ≥ 2: ring[slot][chunk][thread], so a
  // warp's 16-byte slots are contiguous), then the warps' partial sums partial[warp][acc][lane].
  constexpr int kRingBytes = STAGES > 1 ? STAGES * kTiles * 2 * WARPS * kWarpSize * 16 : 0;
  constexpr int kPartialBytes = WARPS * kAcc * kWarpSize * 4;
  __shared__ __align__(16) unsigned char smem[kRingBytes > kPartialBytes ? kRingBytes : kPartialBytes];
  Raw16 (*ring)[kTiles * 2][WARPS * kWarpSize] = reinterpret_cast<Raw16 (*)[kTiles * 2][WARPS * kWarpSize]>(smem);
  float (*partial)[kAcc][kWarpSize] = reinterpret_cast<float (*)[kAcc][kWarpSize]>(smem);
  auto issue_weights = [&](int kb, int slot) {
    const int c = kb * 4 + t;
    const bool in = kChunks % 4 == 0 || c < kChunks;  // lanes past the last chunk get zeros
    const int cc = in ? c : kChunks - 1;
#pragma unroll
    for (int i = 0; i < kTiles; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sm80::cp_async16(sm80::smem_address(&ring[slot][i * 2 + h][threadIdx.x]), wbytes + wrow[i][h] + cc * 16, in ? 16 : 0);
      }
    }
  };

  const int iters = (kPartBlocks - warp + WARPS - 1) / WARPS;  // this warp's k-blocks: kb0 + warp, + WARPS, …
  if constexpr (STAGES > 1) {
#pragma unroll
    for (int it = 0; it < STAGES - 1; ++it) {
      if (it < iters) issue_weights(kb0 + warp + it * WARPS, it);
      sm80::cp_async_commit();  // empty groups keep the wait count uniform
    }
  }
  Stage cur;
  load(kb0 + warp, cur);
  for (int it = 0; it < iters; ++it) {
    const int kb = kb0 + warp + it * WARPS;
    if constexpr (STAGES > 1) {
      if (it + STAGES - 1 < iters) issue_weights(kb + (STAGES - 1) * WARPS, (it + STAGES - 1) % STAGES);
      sm80::cp_async_commit();
    }
    Stage next;
    if (it + 1 < iters) load(kb + WARPS, next);
    if constexpr (STAGES > 1) {
      sm80::cp_async_wait<STAGES - 1>();  // this thread's copies of k-block kb have landed
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) cur.w[i][h] = ring[it % STAGES][i * 2 + h][threadIdx.x];
      }
    }
    compute(cur);
    cur = next;
  }

  // Warps meet in shared memory (lane fastest: no bank conflicts); the CTA's threads then
  // walk the accumulators (a, lane) and finish each (token, row) once.
  if constexpr (STAGES > 1) __syncthreads();  // every warp is done with the ring
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int h = 0; h < kTokGroups; ++h) {
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp][(i * kTokGroups + h) * 4 + e][lane] = acc[i][h][e];
    }
  }
  __syncthreads();
  constexpr int kThreads = WARPS * kWarpSize;
  constexpr int kWarpsToSum = SPLIT > 1 ? 1 : WARPS;  // partial[] rows the epilogue adds up
  if constexpr (SPLIT > 1) {
    // The CTA's sums (its warps' added up), kPerThread per thread in the order idx = tid +
    // j·threads, meet the other parts' in the workspace; the last CTA puts the totals back
    // in partial[0] for the epilogue below.
    constexpr int kPerThread = (kAcc * kWarpSize + kThreads - 1) / kThreads;
    float sums[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int idx = threadIdx.x + j * kThreads;
      sums[j] = 0.f;
      if (idx < kAcc * kWarpSize) {
#pragma unroll
        for (int wp = 0; wp < WARPS; ++wp) sums[j] += partial[wp][idx / kWarpSize][idx % kWarpSize];
      }
    }
    auto ref = [&](int j) -> float& { return sums[j]; };
    if (!split_k_reduce<SPLIT, kPerThread, kThreads>(ref, partial_out, counters)) return;  // its barriers end the reads above
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int idx = threadIdx.x + j * kThreads;
      if (idx < kAcc * kWarpSize) partial[0][idx / kWarpSize][idx % kWarpSize] = sums[j];
    }
    __syncthreads();
  }
  for (int idx = threadIdx.x; idx < kAcc * kWarpSize; idx += kThreads) {
    const int a = idx / kWarpSize, ln = idx % kWarpSize;
    const int i = a / (kTokGroups * 4), h = (a / 4) % kTokGroups, e = a % 4;
    if (kGated && i % 2 == 1) continue;  // up tiles are read with their gate tiles
    const int r = ln / 4 + 8 * (e / 2);   // row within the 16-row tile
    const int j = h * 8 + 2 * (ln % 4) + e % 2;
    const int n = kGated ? n0 + (i / 2) * 16 + r : n0 + i * 16 + r;
    if (j >= count || n >= kOutRows) continue;
    float v = 0.f;
#pragma unroll
    for (int wp = 0; wp < kWarpsToSum; ++wp) v += partial[wp][a][ln];
    v *= global_scale;
    if constexpr (kGated) {
      float up = 0.f;
#pragma unroll
      for (int wp = 0; wp < kWarpsToSum; ++wp) up += partial[wp][a + kTokGroups * 4][ln];
      v = silu(v) * (up * global_scale);
    }
    store(j, n, v);
  }
}

template <class Fmt, int N, int K, int MT, int ROWS, int WARPS, int STAGES, int SPLIT, bool OUT_F32, int EPI,
          bool ACT_ORDER>
__global__ void __launch_bounds__(WARPS* kWarpSize, 1)
    tc_small_kernel(void* __restrict__ y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                    const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                    float global_scale, const half_t* __restrict__ bias, const half_t* __restrict__ residual, int m,
                    float* __restrict__ partial_out, unsigned* __restrict__ counters) {
  constexpr int kOutRows = EPI == kEpiSiluMul ? N / 2 : N;
  constexpr int kPartBlocks = (K / Fmt::kPerChunk + 3) / 4 / SPLIT;
  const int n0 = blockIdx.x * ROWS;  // first output column of the CTA
  const int m0 = blockIdx.y * MT;
  const int kb0 = SPLIT > 1 ? blockIdx.z * kPartBlocks : 0;
  tc_small_prefetch<Fmt, N, K, ROWS, WARPS, STAGES, SPLIT, EPI>(qweight, scales, zeros, n0, kb0);
  grid_dependency_sync();
  tc_small_tile<Fmt, N, K, MT, ROWS, WARPS, STAGES, SPLIT, EPI, ACT_ORDER>(
      [&](int j) { return x + static_cast<long long>(m0 + j) * K; }, m - m0, qweight, scales, zeros, perm, global_scale,
      n0, kb0, partial_out, counters,
      [&](int j, int n, float v) {
        const long long out = static_cast<long long>(m0 + j) * kOutRows + n;
        if constexpr (EPI == kEpiBias) v += half_to_float(bias[n]);
        if constexpr (EPI == kEpiResidual) v += half_to_float(residual[out]);
        store_out<OUT_F32>(y, out, v);
      });
}

}  // namespace onecat
