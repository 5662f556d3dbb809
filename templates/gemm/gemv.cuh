// gemv strategy of the gemm family, for small M: y[M,N] = x[M,K] · W[N,K]^T.
// A CTA of WARPS warps owns ROWS output rows and one tile of MT tokens (blockIdx.y); its
// warps split K. Each lane streams 16-byte chunks of each row with one load, decodes them in
// registers to fp16 pairs, and multiplies with fp16x2 FMAs into a partial sum that is
// flushed to fp32 once per chunk (8–32 products), so weights never touch shared memory and
// the instruction count per byte stays low enough to run at memory speed. With MT > 1 a
// chunk is decoded once for a group of tokens (gemv_token_group): on sm_80+ the tensor-core
// strategy is the one for more than two tokens, on sm_70 the gemv runs up to 16.
// NORM (spec norm=rms): x is the residual stream and the kernel multiplies by RMSNorm(x)
// instead: each CTA first sums its tokens' x² over K (8 KB a token at the 8B shapes, from L2,
// while its first weight chunks are in flight), then scales each x chunk by the token's
// 1/rms and the norm's weight as it reads it — one rounding to fp16, as the rmsnorm kernel
// rounds its output once — so a decode step needs no separate norm launch.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/reduce.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"
#include "gemm/gemv_chunk.cuh"

namespace onecat {

// With EPI == kEpiResidual, residual may be y itself (the residual stream updated in place):
// each output element is read and written by one thread, in that order.
template <class Fmt, int N, int K, int MT, int ROWS, int WARPS, bool OUT_F32, int EPI, bool ACT_ORDER, bool NORM>
__global__ void __launch_bounds__(WARPS* kWarpSize, 1)
    gemv_kernel(void* y, const half_t* __restrict__ x, const void* __restrict__ qweight,
                const void* __restrict__ scales, const void* __restrict__ zeros, const int* __restrict__ perm,
                float global_scale, const half_t* __restrict__ bias, const half_t* residual, int m,
                const half_t* __restrict__ norm_weight, float norm_eps) {
  constexpr int kPer = Fmt::kPerChunk;
  constexpr int kPairs = kPer / 2;
  constexpr int kChunks = K / kPer;
  constexpr int kThreads = WARPS * kWarpSize;
  constexpr int kIters = (kChunks + kThreads - 1) / kThreads;  // chunks per lane per row
  constexpr bool kEvenSplit = kChunks % kThreads == 0;
  constexpr bool kGated = EPI == kEpiSiluMul;
  constexpr int kOutRows = kGated ? N / 2 : N;
  constexpr int kSlots = kGated ? 2 * ROWS : ROWS;  // weight rows a CTA reads
  static_assert(K % kPer == 0, "K must be a multiple of the chunk");

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int out_row0 = blockIdx.x * ROWS;
  const int m0 = blockIdx.y * MT;

  int row[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    // Clamped where the last CTA has fewer rows (loads stay in bounds).
    const int r = kOutRows % ROWS == 0 ? out_row0 + s % ROWS : min(out_row0 + s % ROWS, kOutRows - 1);
    row[s] = (kGated && s >= ROWS) ? r + kOutRows : r;
  }

  // The weights are never written by a kernel of a forward pass, so this CTA's first chunks
  // and their scales (and zeros) are asked into L2 before the wait for the kernel before this
  // one (programmatic dependent launch, common/grid.cuh): on sm_90+ they arrive while it
  // finishes, and the first loads after the wait do not wait on DRAM for the scales either.
  // Everything else (x, the residual, the output) is touched after the wait. (Loading them into
  // registers here instead doubled the kernel's registers on sm_90: 95 → 193 at awq4 gate_up.)
  const char* wbytes = static_cast<const char*>(qweight);
  auto chunk_address = [&](int s, int c) { return wbytes + (static_cast<long long>(row[s]) * kChunks + c) * 16; };
#pragma unroll
  for (int it = 0; it < (kIters < 2 ? kIters : 2); ++it) {
    const int c = it * kThreads + threadIdx.x;
    if (!kEvenSplit && c >= kChunks) break;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      grid_dependency_prefetch_l2(chunk_address(s, c));
      Fmt::prefetch_scale(scales, zeros, row[s], c);
    }
  }
  grid_dependency_sync();

  float acc[MT][kSlots];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) acc[i][s] = 0.f;
  }

  // Iteration `it` reads chunk it·kThreads + threadIdx.x of every row: the ROWS 16-byte loads
  // are issued together. (Holding the next iteration's chunks in registers as well, or asking
  // L2 for them at the start, gained nothing: bench/RESULTS.md, "Tried and lost".)
  struct Stage {
    Raw16 raw[kSlots];
    typename Fmt::Scale sc[kSlots];
  };
  auto load = [&](int it, Stage& st) {
    const int c = it * kThreads + threadIdx.x;
    if (!kEvenSplit && c >= kChunks) return;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      st.raw[s] = gmem_load_nc<16>(chunk_address(s, c));
      st.sc[s] = Fmt::load_scale(scales, zeros, row[s], c);
    }
  };
  // NORM: each token's 1/rms over the whole row (every CTA reads it; the rows are in L2).
  float inv_rms[NORM ? MT : 1];
  // Each chunk is decoded right where it is used, so registers hold raw chunks and the x of a
  // group of kGroup tokens only, one x load serves every row, and one decode every token of
  // the group.
  constexpr int kGroup =
      gemv_token_group<Fmt, MT, kSlots, WARPS, (NORM ? kPairs + MT : 0) + (ACT_ORDER ? 2 * kPer : 0)>();
  auto compute = [&](int it, const Stage& st) {
    const int c = it * kThreads + threadIdx.x;
    if (!kEvenSplit && c >= kChunks) return;
    half2_t gs[NORM ? kPairs : 1];
    if constexpr (NORM) gemv_x_chunk<Fmt, ACT_ORDER>(norm_weight, perm, c, gs);
#pragma unroll
    for (int i0 = 0; i0 < MT; i0 += kGroup) {
      if (m0 + i0 >= m) continue;  // past the last token
      half2_t xs[kGroup][kPairs];
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        const int i = i0 + j;
        if (i >= MT || m0 + i >= m) {  // its sums are not kept; zeros keep them finite
#pragma unroll
          for (int p = 0; p < kPairs; ++p) xs[j][p] = half2_t{0u};
          continue;
        }
        const half_t* xrow = x + static_cast<long long>(m0 + i) * K;
        gemv_x_chunk<Fmt, ACT_ORDER>(xrow, perm, c, xs[j]);
        if constexpr (NORM) {
#pragma unroll
          for (int p = 0; p < kPairs; ++p) {
            const float2 v = half2_to_float2(xs[j][p]), g = half2_to_float2(gs[p]);
            xs[j][p] = float2_to_half2(v.x * inv_rms[i] * g.x, v.y * inv_rms[i] * g.y);
          }
        }
      }
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        float d[kGroup];
        gemv_chunk_dots<Fmt, kGroup>(st.raw[s], st.sc[s], xs, d);
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          if (i0 + j < MT && m0 + i0 + j < m) acc[i0 + j][s] += d[j];
        }
      }
    }
  };
  // Short loops (the usual K at one token) unroll completely; others stay loops (with many
  // tokens × rows a full unroll spills on sm_70).
  constexpr int kUnroll = kIters <= (MT * kSlots <= 8 ? 8 : 2) ? kIters : 1;
  Stage cur;
  load(0, cur);
  if constexpr (NORM) {
    // Σ x² per token while the first chunks load: 16-byte reads of x, a warp sum, the warps
    // meet in shared memory.
    __shared__ float sum_sq[WARPS][MT];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      float ss = 0.f;
      if (m0 + i < m) {
        const half_t* xrow = x + static_cast<long long>(m0 + i) * K;
        for (int j = threadIdx.x; j < K / 8; j += kThreads) {
          const Raw16 xr = gmem_load_nc<16>(xrow + j * 8);
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            const float2 v = half2_to_float2(half2_t{raw_word(xr, w)});
            ss = fmaf(v.x, v.x, fmaf(v.y, v.y, ss));
          }
        }
      }
      ss = group_sum<kWarpSize>(ss);
      if (lane == 0) sum_sq[warp][i] = ss;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      float ss = 0.f;
#pragma unroll
      for (int wp = 0; wp < WARPS; ++wp) ss += sum_sq[wp][i];
      inv_rms[i] = rsqrtf(ss / float(K) + norm_eps);
    }
  }
#pragma unroll kUnroll
  for (int it = 0; it < kIters; ++it) {
    compute(it, cur);
    if (it + 1 < kIters) load(it + 1, cur);
  }

  // Lanes, then warps, meet in shared memory; one thread per (token, row) finishes.
  __shared__ float partial[WARPS][MT][kSlots];
  gemv_warp_sums<MT, kSlots>(acc, partial[warp]);
  __syncthreads();
  for (int t = threadIdx.x; t < MT * ROWS; t += WARPS * kWarpSize) {
    const int i = t / ROWS, r = t % ROWS;
    const int n = out_row0 + r;
    if (m0 + i >= m || n >= kOutRows) continue;
    float v = 0.f, gate = 0.f;
#pragma unroll
    for (int wp = 0; wp < WARPS; ++wp) {
      v += partial[wp][i][kGated ? r + ROWS : r];
      if constexpr (kGated) gate += partial[wp][i][r];
    }
    v *= global_scale;
    const long long out = static_cast<long long>(m0 + i) * kOutRows + n;
    if constexpr (kGated) v *= silu(gate * global_scale);
    if constexpr (EPI == kEpiBias) v += half_to_float(bias[n]);
    if constexpr (EPI == kEpiResidual) v += half_to_float(residual[out]);
    store_out<OUT_F32>(y, out, v);
  }
}

}  // namespace onecat
