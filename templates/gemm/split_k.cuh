// Split-K across CTAs for the mma and tc_small strategies (config split=S): blockIdx.z picks
// one of S equal parts of K, so a shape with few output tiles (narrow N, few tokens) still
// fills the GPU.
// The S CTAs of an output tile meet here after their main loops:
//   - each writes its fp32 accumulators to the workspace in register order (a thread's value a
//     at ((tile * S + z) * ACC + a) * THREADS + tid, so a warp's stores and loads are whole
//     128-byte lines, whatever the atom's fragment layout);
//   - each counts itself in the tile's counter (zeroed once when the workspace is allocated;
//     the last CTA sets it back to zero for the next launch);
//   - the last to arrive sums the S partials in split order, its own included as written, so
//     the result does not depend on which CTA came last, and goes on to the epilogue; the
//     others return false and exit.
// Workspace: tiles × S × ACC × THREADS floats (mma: BM × BN; tc_small: its accumulators padded
// to whole threads) and one counter per tile, tiles = gridDim.x × gridDim.y
// (codegen/gemm/emit.h workspace_floats / workspace_counters).
#pragma once

namespace onecat {

// ref(a): the a-th accumulator of this thread (a compile-time index once unrolled).
template <int SPLIT, int ACC, int THREADS, class Ref>
__device__ __forceinline__ bool split_k_reduce(Ref ref, float* __restrict__ partial, unsigned* __restrict__ counters) {
  const int tid = threadIdx.x;
  const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
  float* mine = partial + (static_cast<long long>(tile) * SPLIT + blockIdx.z) * ACC * THREADS + tid;
#pragma unroll
  for (int a = 0; a < ACC; ++a) __stcg(mine + a * THREADS, ref(a));
  __threadfence();
  __syncthreads();
  int last = 0;
  if (tid == 0) {
    last = atomicAdd(counters + tile, 1u) == SPLIT - 1;
    if (last) counters[tile] = 0;  // every CTA of the tile has counted: ready for the next launch
  }
  if (!__syncthreads_or(last)) return false;
  __threadfence();
  const float* all = partial + static_cast<long long>(tile) * SPLIT * ACC * THREADS + tid;
#pragma unroll
  for (int a = 0; a < ACC; ++a) ref(a) = 0.f;
#pragma unroll 1
  for (int z = 0; z < SPLIT; ++z) {
#pragma unroll
    for (int a = 0; a < ACC; ++a) ref(a) += __ldcg(all + (z * ACC + a) * THREADS);
  }
  return true;
}

}  // namespace onecat
