// Split-K across CTAs for the mma and tc_small strategies (config split=S): blockIdx.z picks
// one of S equal parts of K, so a shape with few output tiles (narrow N, few tokens) still
// fills the GPU.
// The S CTAs of an output tile meet here after their main loops:
//   - each writes its fp32 accumulators to the workspace, V at a time (V = 4, 2 or 1: the
//     widest that divides ACC): a thread's values a .. a+V-1 at
//     (tile * S + z) * ACC * THREADS + a * THREADS + tid * V, so a warp's stores and loads are whole
//     128-byte lines whatever the atom's fragment layout, one instruction per V values;
//   - each counts itself in the tile's counter (zeroed once when the workspace is allocated;
//     the last CTA sets it back to zero for the next launch) by one acq_rel atomic after the CTA
//     barrier: it releases the CTA's partials (cumulatively, through the barrier) and lets the
//     last CTA acquire every other's, without a sequentially consistent fence (MEMBAR.SC) on
//     either side;
//   - the last to arrive sums the S partials in split order, its own from its registers (the
//     values it stored, so the result does not depend on which CTA came last), and goes on to
//     the epilogue; the others return false and exit. It loads a group of accumulators from
//     every other part at once (about kInFlight floats a thread) before adding any of them, so
//     its tail is ACC · S / kInFlight L2 round trips rather than one per part.
// Workspace: tiles × S × ACC × THREADS floats (mma: BM × BN; tc_small: its accumulators padded
// to whole threads) and one counter per tile, tiles = gridDim.x × gridDim.y
// (codegen/gemm/emit.h workspace_floats / workspace_counters).
#pragma once

namespace onecat {

// V consecutive floats (V = 4, 2 or 1) as one 16-, 8- or 4-byte access through L2.
template <int V>
__device__ __forceinline__ void split_k_store(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    __stcg(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
  } else if constexpr (V == 2) {
    __stcg(reinterpret_cast<float2*>(p), make_float2(v[0], v[1]));
  } else {
    __stcg(p, v[0]);
  }
}
template <int V>
__device__ __forceinline__ void split_k_load(const float* p, float* v) {
  if constexpr (V == 4) {
    const float4 q = __ldcg(reinterpret_cast<const float4*>(p));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else if constexpr (V == 2) {
    const float2 q = __ldcg(reinterpret_cast<const float2*>(p));
    v[0] = q.x, v[1] = q.y;
  } else {
    v[0] = __ldcg(p);
  }
}

// ref(a): the a-th accumulator of this thread (a compile-time index once unrolled).
template <int SPLIT, int ACC, int THREADS, class Ref>
__device__ __forceinline__ bool split_k_reduce(Ref ref, float* __restrict__ partial, unsigned* __restrict__ counters) {
  constexpr int V = ACC % 4 == 0 ? 4 : ACC % 2 == 0 ? 2 : 1;
  // Floats of the other parts a thread has in flight at once, in groups of G accumulators:
  // twice the accumulators up to 128, so that the reduction does not take more registers than
  // the main loop it follows (a 32×128 tile's 32 accumulators with 128 in flight went from 164
  // to 238 registers, from three CTAs an SM to two); 32 beside 128 accumulators (a 64×64 warp
  // tile), where more spilled.
  constexpr int kInFlight = ACC > 64 ? 32 : 2 * ACC;
  constexpr int kWanted = kInFlight / SPLIT / V * V;
  constexpr int G = kWanted < V ? V : kWanted > ACC ? ACC : kWanted;
  static_assert(G % V == 0, "whole vectors per group");
  const int tid = threadIdx.x;
  const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
  const int self = blockIdx.z;
  const long long part_floats = static_cast<long long>(ACC) * THREADS;
  float* const base = partial + static_cast<long long>(tile) * SPLIT * part_floats + tid * V;
  auto at = [&](int z, int a) { return base + z * part_floats + a * THREADS; };  // a: a multiple of V
  float* const mine = at(self, 0);
#pragma unroll
  for (int a = 0; a < ACC; a += V) {
    float v[V];
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = ref(a + e);
    split_k_store<V>(mine + a * THREADS, v);
  }
  // Every thread's partials are written (the barrier orders them before thread 0's atomic).
  __syncthreads();
  int last = 0;
  if (tid == 0) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counters + tile) : "memory");
    last = old == SPLIT - 1;
    if (last) counters[tile] = 0;  // every CTA of the tile has counted: ready for the next launch
  }
  // The barrier also orders the other threads' loads below after thread 0's acquire.
  if (!__syncthreads_or(last)) return false;
#pragma unroll
  for (int g = 0; g < ACC; g += G) {  // the last group may be shorter: guarded by a < ACC below
    float got[SPLIT][G];
#pragma unroll
    for (int z = 0; z < SPLIT; ++z) {
      if (z == self) continue;  // uniform over the CTA
#pragma unroll
      for (int i = 0; i < G; i += V) {
        if (g + i >= ACC) break;
        split_k_load<V>(at(z, g + i), &got[z][i]);
      }
    }
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const int a = g + i;
      if (a >= ACC) break;
      // In split order from 0, as every CTA of the tile would: (((0 + p0) + p1) + ...).
      float sum = 0.f;
#pragma unroll
      for (int z = 0; z < SPLIT; ++z) sum += z == self ? ref(a) : got[z][i];
      ref(a) = sum;
    }
  }
  return true;
}

}  // namespace onecat
