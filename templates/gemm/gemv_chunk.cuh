// What the gemv kernels (the gemm family's gemv.cuh, the moe family's gemv.cuh) do with one
// 16-byte weight chunk: x's matching values as fp16 pairs, and the chunk's dot product with
// them — fp16 FMAs into one partial sum per chunk (8–32 products), flushed to fp32 once, so
// the instruction count per byte stays low enough to run at memory speed. With several tokens
// a chunk is decoded once for a group of them (gemv_token_group).
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/reduce.cuh"
#include "gemm/formats.cuh"

namespace onecat {

// Chunk c's k values of the row xrow as fp16 pairs: 16-byte loads, or through the gptq
// act-order permutation perm (packed column k holds original column perm[k]). CG: the row was
// written by other CTAs of the same launch, so it is read through L2, not the read-only path.
template <class Fmt, bool ACT_ORDER, bool CG = false>
__device__ __forceinline__ void gemv_x_chunk(const half_t* __restrict__ xrow, const int* __restrict__ perm, int c,
                                             half2_t (&xs)[Fmt::kPerChunk / 2]) {
  constexpr int kPer = Fmt::kPerChunk;
  if constexpr (ACT_ORDER) {
#pragma unroll
    for (int p = 0; p < kPer / 2; ++p) {
      const int k = c * kPer + 2 * p;
      if constexpr (CG) {
        xs[p].bits =
            unsigned(gmem_load_cg<2>(xrow + perm[k]).h[0]) | (unsigned(gmem_load_cg<2>(xrow + perm[k + 1]).h[0]) << 16);
      } else {
        xs[p].bits = unsigned(xrow[perm[k]].bits) | (unsigned(xrow[perm[k + 1]].bits) << 16);
      }
    }
  } else {
#pragma unroll
    for (int q = 0; q < kPer / 8; ++q) {
      const Raw16 xr = CG ? gmem_load_cg<16>(xrow + c * kPer + q * 8) : gmem_load_nc<16>(xrow + c * kPer + q * 8);
#pragma unroll
      for (int j = 0; j < 4; ++j) xs[q * 4 + j].bits = raw_word(xr, j);
    }
  }
}

// The chunk's dot products with G tokens' xs, in fp32 (out[j] for xs[j]): each pair is decoded
// once, where it is multiplied, for all G tokens (decoding the whole chunk first let ptxas hold
// every row's decoded chunk at once: spills). Word-scaled formats multiply each word's (4 pairs')
// unscaled partial by its scale once instead of every pair (|q − z| ≤ 16, 4 products per half:
// far from fp16's range). Each token's sum takes the same operations in the same order for any G.
template <class Fmt, int G>
__device__ __forceinline__ void gemv_chunk_dots(const Raw16& raw, const typename Fmt::Scale& sc,
                                                const half2_t (&xs)[G][Fmt::kPerChunk / 2], float (&out)[G]) {
  constexpr int kPairs = Fmt::kPerChunk / 2;
  half2_t h[G];
#pragma unroll
  for (int j = 0; j < G; ++j) h[j] = half2_t{0u};
  if constexpr (Fmt::kWordScaled) {
#pragma unroll
    for (int wd = 0; wd < kPairs / 4; ++wd) {
      half2_t hw[G];
#pragma unroll
      for (int j = 0; j < G; ++j) hw[j] = half2_t{0u};
#pragma unroll
      for (int p = 4 * wd; p < 4 * wd + 4; ++p) {
        const half2_t w = Fmt::decode_unscaled(raw, p, sc);
#pragma unroll
        for (int j = 0; j < G; ++j) hw[j] = hfma2(w, xs[j][p], hw[j]);
      }
#pragma unroll
      for (int j = 0; j < G; ++j) h[j] = hfma2(hw[j], Fmt::word_scale(sc), h[j]);
    }
  } else {
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      const half2_t w = Fmt::decode(raw, p, sc);
#pragma unroll
      for (int j = 0; j < G; ++j) h[j] = hfma2(w, xs[j][p], h[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if constexpr (Fmt::kFlushScaled) {
      out[j] = Fmt::flush(sc) * half2_sum(h[j]);
    } else {
      out[j] = half2_sum(h[j]);
    }
  }
}

// The chunk's dot product with one token's xs (gemv_chunk_dots of one).
template <class Fmt>
__device__ __forceinline__ float gemv_chunk_dot(const Raw16& raw, const typename Fmt::Scale& sc,
                                                const half2_t (&xs)[Fmt::kPerChunk / 2]) {
  const half2_t(&one)[1][Fmt::kPerChunk / 2] = reinterpret_cast<const half2_t(&)[1][Fmt::kPerChunk / 2]>(xs);
  float out[1];
  gemv_chunk_dots<Fmt, 1>(raw, sc, one, out);
  return out[0];
}

// How many tokens' x a lane holds at once, so that each chunk is decoded once for them all
// (MT > 1): what is left of three quarters of the kernel's register cap (WARPS warps, one CTA
// an SM) after a rough count of the rest — each of the SLOTS rows' raw chunk and scale (6),
// the MT × SLOTS sums, 32 for addresses, EXTRA for the kernel's own (a fused norm's weights
// and 1/rms, act-order's permuted columns) — so that many tokens × rows do not spill where one
// token at a time did not. fp16 weights need no decode (a pair is a raw word): one token.
template <class Fmt, int MT, int SLOTS, int WARPS, int EXTRA = 0>
__host__ __device__ constexpr int gemv_token_group() {
  constexpr int kPairs = Fmt::kPerChunk / 2;
  constexpr int kCap = 2048 / WARPS < 255 ? 2048 / WARPS : 255;
  constexpr int kBudget = kCap * 3 / 4 - (SLOTS * 6 + MT * SLOTS + 32 + EXTRA);
  constexpr int kMost = kPairs <= 4 || kBudget < 2 * kPairs ? 1 : kBudget / kPairs;
  return MT < kMost ? MT : kMost;
}

// Each of a warp's MT × SLOTS sums over its 32 lanes, into this warp's row of the CTA's
// partial sums (partial[i][s] for token i, weight row s). While the sums are a power of two
// up to 32 they reduce in one transposing pass (V − 1 + log2(32/V) shuffles for V sums, not
// 5·V); the caller's barrier orders the stores before any read.
template <int MT, int SLOTS>
__device__ __forceinline__ void gemv_warp_sums(const float (&acc)[MT][SLOTS], float (&partial)[MT][SLOTS]) {
  const int lane = threadIdx.x % kWarpSize;
  constexpr int kSums = MT * SLOTS;
  if constexpr (kSums <= kWarpSize && (kSums & (kSums - 1)) == 0) {
    float v[kSums];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int s = 0; s < SLOTS; ++s) v[i * SLOTS + s] = acc[i][s];
    }
    warp_sum_transposed<kSums>(v);
    constexpr int kLanesPerSum = kWarpSize / kSums;
    if (lane % kLanesPerSum == 0) (&partial[0][0])[lane / kLanesPerSum] = v[0];
  } else {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int s = 0; s < SLOTS; ++s) {
        const float v = group_sum<kWarpSize>(acc[i][s]);
        if (lane == 0) partial[i][s] = v;
      }
    }
  }
}

}  // namespace onecat
