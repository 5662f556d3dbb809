// Embedding gather: out[t] = table[ids[t] − vocab_start], one token's row per ROW_THREADS
// threads, VEC fp16 values per access. An id outside [vocab_start, vocab_start + VOCAB) gives a
// zero row: another rank's slice under vocabulary parallelism (the all-reduce sums the one
// rank that holds it) or a bad id, which must not read outside the table.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"

namespace onecat {

template <int VOCAB, int HIDDEN, int ROW_THREADS, int VEC, int ROWS_PER_CTA>
__global__ void __launch_bounds__(ROW_THREADS * ROWS_PER_CTA)
    embedding_kernel(half_t* __restrict__ out, const half_t* __restrict__ table, const int* __restrict__ ids,
                     int vocab_start, int tokens) {
  grid_dependency_sync();
  constexpr int kVectorsPerRow = HIDDEN / VEC;
  constexpr int kIters = (kVectorsPerRow + ROW_THREADS - 1) / ROW_THREADS;
  constexpr int kBytes = VEC * 2;
  static_assert(HIDDEN % VEC == 0, "VEC must divide HIDDEN");

  const int lane = threadIdx.x % ROW_THREADS;
  const int token = blockIdx.x * ROWS_PER_CTA + threadIdx.x / ROW_THREADS;
  if (token >= tokens) return;
  // Unsigned: one compare rejects ids below vocab_start (they wrap to large values) and above.
  const unsigned row = unsigned(ids[token]) - unsigned(vocab_start);
  const bool valid = row < unsigned(VOCAB);
  const half_t* src = table + (long long)(valid ? row : 0) * HIDDEN;
  half_t* dst = out + (long long)token * HIDDEN;

  // Every load before the first store, so a thread has kIters loads in flight at once.
  Chunk<kBytes> c[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int v = it * ROW_THREADS + lane;
    c[it] = Chunk<kBytes>{};
    if (valid && v < kVectorsPerRow) c[it] = gmem_load_nc<kBytes>(src + v * VEC);
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int v = it * ROW_THREADS + lane;
    if (v < kVectorsPerRow) gmem_store<kBytes>(dst + v * VEC, c[it]);
  }
}

}  // namespace onecat
