// What the gemv kernels (the gemm family's gemv.cuh, the moe family's gemv.cuh) do with one
// 16-byte weight chunk: x's matching values as fp16 pairs, and the chunk's dot product with
// them — fp16 FMAs into one partial sum per chunk (8–32 products), flushed to fp32 once, so
// the instruction count per byte stays low enough to run at memory speed.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "gemm/formats.cuh"

namespace onecat {

// Chunk c's k values of the row xrow as fp16 pairs: 16-byte loads, or through the gptq
// act-order permutation perm (packed column k holds original column perm[k]).
template <class Fmt, bool ACT_ORDER>
__device__ __forceinline__ void gemv_x_chunk(const half_t* __restrict__ xrow, const int* __restrict__ perm, int c,
                                             half2_t (&xs)[Fmt::kPerChunk / 2]) {
  constexpr int kPer = Fmt::kPerChunk;
  if constexpr (ACT_ORDER) {
#pragma unroll
    for (int p = 0; p < kPer / 2; ++p) {
      const int k = c * kPer + 2 * p;
      xs[p].bits = unsigned(xrow[perm[k]].bits) | (unsigned(xrow[perm[k + 1]].bits) << 16);
    }
  } else {
#pragma unroll
    for (int q = 0; q < kPer / 8; ++q) {
      const Raw16 xr = gmem_load_nc<16>(xrow + c * kPer + q * 8);
#pragma unroll
      for (int j = 0; j < 4; ++j) xs[q * 4 + j].bits = raw_word(xr, j);
    }
  }
}

// The chunk's dot product with xs, in fp32. Word-scaled formats multiply each word's (4 pairs')
// unscaled partial by its scale once instead of every pair (|q − z| ≤ 16, 4 products per half:
// far from fp16's range).
template <class Fmt>
__device__ __forceinline__ float gemv_chunk_dot(const Raw16& raw, const typename Fmt::Scale& sc,
                                                const half2_t (&xs)[Fmt::kPerChunk / 2]) {
  constexpr int kPairs = Fmt::kPerChunk / 2;
  half2_t h{0u};
  if constexpr (Fmt::kWordScaled) {
#pragma unroll
    for (int wd = 0; wd < kPairs / 4; ++wd) {
      half2_t hw{0u};
#pragma unroll
      for (int p = 4 * wd; p < 4 * wd + 4; ++p) hw = hfma2(Fmt::decode_unscaled(raw, p, sc), xs[p], hw);
      h = hfma2(hw, Fmt::word_scale(sc), h);
    }
  } else {
#pragma unroll
    for (int p = 0; p < kPairs; ++p) h = hfma2(Fmt::decode(raw, p, sc), xs[p], h);
  }
  if constexpr (Fmt::kFlushScaled) {
    return Fmt::flush(sc) * half2_sum(h);
  } else {
    return half2_sum(h);
  }
}

}  // namespace onecat
