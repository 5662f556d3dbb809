// Greedy decoding of many rows at once: tokens[r] = the lowest id among the maxima of
// logits[r][0, VOCAB) (NaN never wins; a row of NaN and −inf gives 0), as cpu::argmax.
// SPLIT CTAs share a row (grid x: rows, y: SPLIT), each reducing a contiguous chunk to one packed (key, id); the last
// of them to finish (a counter per row) takes the maximum of the SPLIT partials, leaving
// counters and partials at 0 again. The maximum of packed values does not depend on the order, so the result is
// the same however the CTAs are scheduled. VEC floats per load (VEC = 4 needs VOCAB % 4 == 0,
// so every row starts 16-byte aligned); UNROLL loads in flight per thread.
#pragma once
#include "common/grid.cuh"
#include "sampling/common.cuh"

namespace onecat {
namespace sampling {

// Dynamic shared memory: THREADS u64 slots for the block reduction, then the flag that the
// CTA is the row's last.
template <int THREADS>
struct ArgmaxShared {
  u64 slots[THREADS];
  int last;
};

template <int VOCAB, int THREADS, int VEC, int UNROLL, int SPLIT>
__device__ __forceinline__ void argmax_body(int* __restrict__ tokens, const float* __restrict__ logits,
                                            u64* __restrict__ partials, unsigned* __restrict__ counters,
                                            ArgmaxShared<THREADS>& sh) {
  static_assert(VEC == 1 || (VEC == 4 && VOCAB % 4 == 0), "VEC=4 needs VOCAB % 4 == 0");
  // Each CTA's chunk is a whole number of vectors.
  constexpr int kVectors = (VOCAB + VEC - 1) / VEC;
  constexpr int kChunkVectors = (kVectors + SPLIT - 1) / SPLIT;
  const int row = blockIdx.x, part = blockIdx.y;
  const float* x = logits + (long long)row * VOCAB;
  const int first = part * kChunkVectors;
  const int last = first + kChunkVectors < kVectors ? first + kChunkVectors : kVectors;

  u64 best = 0;  // below every real token's pack
  auto consider = [&](float v, int id) {
    if (v != v) v = negative_infinity();
    const u64 p = pack_order(order_key(v), id);
    best = p > best ? p : best;
  };
  for (int base = first + int(threadIdx.x); base < last; base += THREADS * UNROLL) {
    if constexpr (VEC == 4) {
      float4 v[UNROLL];
ONECAT_SAMPLING_UNROLL
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * THREADS;
        if (i < last) v[u] = __ldg(reinterpret_cast<const float4*>(x) + i);
      }
ONECAT_SAMPLING_UNROLL
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * THREADS;
        if (i < last) {
          consider(v[u].x, 4 * i);
          consider(v[u].y, 4 * i + 1);
          consider(v[u].z, 4 * i + 2);
          consider(v[u].w, 4 * i + 3);
        }
      }
    } else {
      float v[UNROLL];
ONECAT_SAMPLING_UNROLL
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * THREADS;
        if (i < last) v[u] = __ldg(x + i);
      }
ONECAT_SAMPLING_UNROLL
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * THREADS;
        if (i < last) consider(v[u], i);
      }
    }
  }
  best = block_reduce<THREADS>(best, sh.slots, MaxOp());
  if constexpr (SPLIT == 1) {
    if (threadIdx.x == 0) tokens[row] = best == 0 ? 0 : packed_id(best);
  } else {
    if (threadIdx.x == 0) {
      partials[(long long)row * SPLIT + part] = best;
      __threadfence();  // the partial is visible before the counter says so
      sh.last = atomicAdd(counters + row, 1u) == unsigned(SPLIT - 1);
    }
    __syncthreads();
    if (sh.last && threadIdx.x == 0) {
      __threadfence();
      u64 all = 0;
      for (int s = 0; s < SPLIT; ++s) {
        // A coherent read that leaves the partial 0: the whole workspace is zero after every
        // launch, so a later launch with other rows or another split (whose counters lie
        // where these partials were) finds its counters at 0.
        const u64 p = atomicExch(partials + (long long)row * SPLIT + s, 0ull);
        all = p > all ? p : all;
      }
      tokens[row] = all == 0 ? 0 : packed_id(all);
      counters[row] = 0;  // ready for the next launch
    }
  }
}

#ifndef ONECAT_EMULATED_CTA
template <int VOCAB, int THREADS, int VEC, int UNROLL, int SPLIT>
__global__ void __launch_bounds__(THREADS)
    argmax_kernel(int* __restrict__ tokens, const float* __restrict__ logits, u64* __restrict__ partials,
                  unsigned* __restrict__ counters) {
  grid_dependency_sync();
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  argmax_body<VOCAB, THREADS, VEC, UNROLL, SPLIT>(tokens, logits, partials, counters,
                                                  *reinterpret_cast<ArgmaxShared<THREADS>*>(shared_bytes));
}
#endif

}  // namespace sampling
}  // namespace onecat
