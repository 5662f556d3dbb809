// moe op=route: routes every token of the step and groups the (token, slot) pairs by expert, so
// the expert kernels that follow read their tiles without the host.
// Selection compares the fp16 logits (softmax keeps their order), as a 32-bit key: the logit's
// bits made order-preserving above, 0xffff - expert below, so the warp maximum is the highest
// logit with ties to the lower id, and the k picks come out in descending order. The weights
// are exp(l - max) over the sum of all experts' (softmax) or of the chosen ones' (norm=1,
// norm_topk_prob) in fp32. Grouping is deterministic (moe_route_kernel below): each expert's
// pairs stay in ascending order.
// SIGMOID (DeepSeek-V3's router, codegen/moe/spec.h): scores sigmoid(logit) computed in double
// and rounded once (the CPU reference's bits), choice values score + bias; GROUPS > 1 rates each
// group of EXPERTS/GROUPS consecutive experts by its two best choice values (a warp merge of
// top-2 pairs), keeps the TOPK_GROUPS best groups (ties: the lower group) and counts the
// others' experts as 0; the picks are the highest choice values as 64-bit keys (value bits made
// order-preserving above, 0xffffffff - expert below), their weights the scores.
// Either router multiplies the weights by `scale` (the routed scaling factor).
#pragma once
#include "common/fp16.cuh"
#include "common/grid.cuh"
#include "common/reduce.cuh"

namespace onecat {

__device__ __forceinline__ unsigned ordered_half_key(unsigned short bits) {
  return (bits & 0x8000u) ? (~unsigned(bits) & 0xffffu) : (unsigned(bits) | 0x8000u);
}

// Top-k runs one of these a chosen expert, on the path before a decode CTA's first weight load:
// sm_80+ has the warp's maximum in one instruction (the same value as the shuffles).
__device__ __forceinline__ unsigned warp_max_u32(unsigned v) {
#if __CUDA_ARCH__ >= 800
  unsigned m;
  asm("redux.sync.max.u32 %0, %1, 0xffffffff;" : "=r"(m) : "r"(v));
  return m;
#else
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
#endif
}

__device__ __forceinline__ float warp_max_f32(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ unsigned ordered_float_key(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const unsigned long long n = __shfl_xor_sync(0xffffffffu, v, o);
    v = n > v ? n : v;
  }
  return v;
}

// runtime/cpu/moe.cpp moe_sigmoid: the same double expression, rounded once.
__device__ __forceinline__ float moe_sigmoid(float x) { return float(1.0 / (1.0 + exp(-double(x)))); }

// The sigmoid router's picks for one token's logits `row` (every lane of the warp calls it):
// chosen[k] and score[k] in descending choice order, identical in every lane.
template <int EXPERTS, int TOPK, bool BIAS, int GROUPS, int TOPK_GROUPS>
__device__ __forceinline__ void route_sigmoid(const half_t* __restrict__ row, const float* __restrict__ bias,
                                              int lane, int (&chosen)[TOPK], float (&score)[TOPK]) {
  constexpr int kPerLane = (EXPERTS + 31) / 32;
  constexpr int kPerGroup = EXPERTS / GROUPS;
  float s[kPerLane], c[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    s[i] = 0.f, c[i] = 0.f;
    if (e < EXPERTS) {
      s[i] = moe_sigmoid(half_to_float(row[e]));
      c[i] = BIAS ? s[i] + bias[e] : s[i];
    }
  }
  if constexpr (GROUPS > 1) {
    const float kNegInf = -__int_as_float(0x7f800000);
    float rating[GROUPS];
#pragma unroll
    for (int g = 0; g < GROUPS; ++g) {
      float a = kNegInf, b = kNegInf;  // this lane's two best in group g, then the warp's
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + 32 * i;
        if (e < EXPERTS && e / kPerGroup == g) {
          b = fmaxf(b, fminf(a, c[i]));
          a = fmaxf(a, c[i]);
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o /= 2) {
        const float a2 = __shfl_xor_sync(0xffffffffu, a, o), b2 = __shfl_xor_sync(0xffffffffu, b, o);
        b = fmaxf(fminf(a, a2), fmaxf(b, b2));
        a = fmaxf(a, a2);
      }
      rating[g] = a + b;
    }
    unsigned kept = 0u;
#pragma unroll
    for (int r = 0; r < TOPK_GROUPS; ++r) {
      int best = -1;
#pragma unroll
      for (int g = 0; g < GROUPS; ++g) {
        if (!((kept >> g) & 1u) && (best < 0 || rating[g] > rating[best])) best = g;
      }
      kept |= 1u << best;
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < EXPERTS && !((kept >> (e / kPerGroup)) & 1u)) c[i] = 0.f;
    }
  }
  unsigned taken = 0u;  // bit i: this lane's expert lane + 32i was picked
#pragma unroll
  for (int k = 0; k < TOPK; ++k) {
    unsigned long long best = 0ull;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < EXPERTS && !((taken >> i) & 1u)) {
        const unsigned long long key =
            (static_cast<unsigned long long>(ordered_float_key(c[i])) << 32) | (0xffffffffu - unsigned(e));
        best = key > best ? key : best;
      }
    }
    best = warp_max_u64(best);
    const int e = int(0xffffffffu - unsigned(best & 0xffffffffull));
    float mine = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (lane + 32 * i == e) taken |= 1u << i, mine = s[i];
    }
    chosen[k] = e;
    score[k] = __shfl_sync(0xffffffffu, mine, e % 32);
  }
}

__device__ __forceinline__ float warp_sum_f32(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Exclusive scan of v[0..N) in shared memory into out[0..N) by a CTA of THREADS threads (every
// thread calls it; v and out may be the same array); returns the total.
template <int N, int THREADS>
__device__ __forceinline__ int block_exclusive_scan(const int* v, int* out) {
  constexpr int kPer = (N + THREADS - 1) / THREADS;
  int mine[kPer];
  int local = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x * kPer + i;
    mine[i] = j < N ? v[j] : 0;
    local += mine[i];
  }
  int total;
  int run = block_exclusive_sum<THREADS>(local, total);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x * kPer + i;
    if (j < N) out[j] = run;
    run += mine[i];
  }
  __syncthreads();
  return total;
}

// One token's routing (every lane of the warp calls it): chosen[k] and chosen_w[k] in
// descending choice order, identical in every lane; the weight of pick k is chosen_w[k] /
// (the returned divisor) × the scaling factor (softmax: exp(l - max) over all experts' sum, or
// the chosen ones' with NORM; sigmoid: the scores over their sum + 1e-20 with NORM, else 1).
template <int EXPERTS, int TOPK, bool NORM, bool SIGMOID, bool BIAS, int GROUPS, int TOPK_GROUPS>
__device__ __forceinline__ float route_token(const half_t* __restrict__ row, const float* __restrict__ bias, int lane,
                                             int (&chosen)[TOPK], float (&chosen_w)[TOPK]) {
  constexpr int kPerLane = (EXPERTS + 31) / 32;
  float chosen_sum = 0.f, total = 0.f;
  if constexpr (SIGMOID) {
    route_sigmoid<EXPERTS, TOPK, BIAS, GROUPS, TOPK_GROUPS>(row, bias, lane, chosen, chosen_w);
#pragma unroll
    for (int k = 0; k < TOPK; ++k) chosen_sum += chosen_w[k];
    chosen_sum += 1e-20f;
    total = 1.f;
  } else {
    unsigned key[kPerLane];
    float logit[kPerLane];
    float top = -__int_as_float(0x7f800000);  // -inf
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < EXPERTS) {
        const half_t h = row[e];
        logit[i] = half_to_float(h);
        key[i] = (ordered_half_key(h.bits) << 16) | (0xffffu - unsigned(e));
        top = fmaxf(top, logit[i]);
      } else {
        logit[i] = -__int_as_float(0x7f800000);
        key[i] = 0u;
      }
    }
    top = warp_max_f32(top);
    if constexpr (!NORM) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) total += lane + 32 * i < EXPERTS ? __expf(logit[i] - top) : 0.f;
      total = warp_sum_f32(total);
    }
#pragma unroll
    for (int k = 0; k < TOPK; ++k) {
      unsigned best = 0u;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) best = max(best, key[i]);
      best = warp_max_u32(best);
      const int e = int(0xffffu - (best & 0xffffu));
      // The owner drops its pick from later rounds.
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (lane + 32 * i == e) key[i] = 0u;
      }
      const float w = __expf(half_to_float(row[e]) - top);  // (an L1 hit: this warp read the row)
      chosen[k] = e;
      chosen_w[k] = w;
      chosen_sum += w;
    }
  }
  return NORM ? chosen_sum : total;
}

// ids, weights: [tokens][TOPK] (pair p = token·TOPK + slot); offsets: [EXPERTS + 1] (expert e's
// pairs are sorted[offsets[e] .. offsets[e+1])); sorted: [tokens·TOPK] pair indices.
// bias: [EXPERTS] fp32 (SIGMOID with BIAS; else unread).
// A CTA routes TOKENS tokens (a warp per token) and ranks its pairs among its own pairs of the
// same expert (one warp, in pair order: __match_any_sync ranks equal experts within 32 pairs).
// One CTA: it places them itself. Several: each leaves its per-expert counts and its pairs'
// ranks in the workspace ([0]: a counter, then counts [CTAs][EXPERTS], then ranks [pairs]) and
// the last to finish (the counter) turns the counts into each CTA's base per expert and the
// offsets, places every pair at offset + base + rank, and sets the counter back to 0: the
// workspace is zeroed once, when allocated. Pair order within an expert follows from CTA order
// and rank, so the result does not depend on which CTA finished when.
template <int EXPERTS, int TOPK, bool NORM, int THREADS, int TOKENS, bool SIGMOID, bool BIAS, int GROUPS,
          int TOPK_GROUPS>
__global__ void __launch_bounds__(THREADS, 1)
    moe_route_kernel(int* __restrict__ ids, float* __restrict__ weights, int* __restrict__ offsets,
                     int* __restrict__ sorted, const half_t* __restrict__ logits, int tokens,
                     const float* __restrict__ bias, float scale, int* __restrict__ workspace) {
  grid_dependency_sync();
  constexpr int kWarps = THREADS / 32;
  constexpr int kPairs = TOKENS * TOPK;
  __shared__ int s_ids[kPairs];
  __shared__ int s_rank[kPairs];
  __shared__ int count[EXPERTS];  // this CTA's pairs per expert; the last CTA's: all CTAs'
  __shared__ int first[EXPERTS];  // offsets
  __shared__ bool last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t0 = blockIdx.x * TOKENS;
  const int n_tokens = min(TOKENS, tokens - t0);
  for (int e = threadIdx.x; e < EXPERTS; e += THREADS) count[e] = 0;

  for (int tl = warp; tl < n_tokens; tl += kWarps) {
    const int t = t0 + tl;
    const half_t* row = logits + static_cast<long long>(t) * EXPERTS;
    float chosen_w[TOPK];
    int chosen[TOPK];
    const float denom =
        route_token<EXPERTS, TOPK, NORM, SIGMOID, BIAS, GROUPS, TOPK_GROUPS>(row, bias, lane, chosen, chosen_w);
    if (lane < TOPK) {
      float w = 0.f;
      int e = 0;
#pragma unroll
      for (int k = 0; k < TOPK; ++k) {
        if (k == lane) w = chosen_w[k], e = chosen[k];
      }
      ids[t * TOPK + lane] = e;
      weights[t * TOPK + lane] = w / denom * scale;
      s_ids[tl * TOPK + lane] = e;
    }
  }
  __syncthreads();

  // This CTA's ranks, in pair order.
  const int n_pairs = n_tokens * TOPK;
  if (warp == 0) {
    for (int base = 0; base < n_pairs; base += 32) {
      const int p = base + lane;
      const bool in = p < n_pairs;
      const int e = in ? s_ids[p] : -1 - lane;  // out-of-range lanes match nobody
      const unsigned same = __match_any_sync(0xffffffffu, e);
      const unsigned below = same & ((1u << lane) - 1u);
      int r = 0;
      if (in) r = count[e] + __popc(below);
      __syncwarp();
      if (in) {
        s_rank[p] = r;
        if (below == 0u) count[e] += __popc(same);  // the lowest lane of the group advances it
      }
      __syncwarp();
    }
  }
  __syncthreads();

  if (gridDim.x == 1) {
    const int total = block_exclusive_scan<EXPERTS, THREADS>(count, first);
    for (int e = threadIdx.x; e < EXPERTS; e += THREADS) offsets[e] = first[e];
    if (threadIdx.x == 0) offsets[EXPERTS] = total;
    for (int p = threadIdx.x; p < n_pairs; p += THREADS) sorted[first[s_ids[p]] + s_rank[p]] = p;
    return;
  }

  unsigned* counter = reinterpret_cast<unsigned*>(workspace);
  int* counts = workspace + 4;  // [CTAs][EXPERTS]: the counts, then the bases
  int* ranks = counts + static_cast<long long>(gridDim.x) * EXPERTS;
  for (int e = threadIdx.x; e < EXPERTS; e += THREADS) counts[blockIdx.x * EXPERTS + e] = count[e];
  for (int p = threadIdx.x; p < n_pairs; p += THREADS) ranks[t0 * TOPK + p] = s_rank[p];
  __threadfence();  // counts, ranks and ids visible before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();

  // The last CTA: each expert's count per CTA becomes that CTA's base (a running sum in CTA
  // order), the totals the offsets.
  for (int e = threadIdx.x; e < EXPERTS; e += THREADS) {
    int run = 0;
    for (int b = 0; b < int(gridDim.x); ++b) {
      int* c = counts + b * EXPERTS + e;
      const int n = __ldcg(c);
      *c = run;
      run += n;
    }
    count[e] = run;
  }
  __syncthreads();
  const int total = block_exclusive_scan<EXPERTS, THREADS>(count, first);
  for (int e = threadIdx.x; e < EXPERTS; e += THREADS) offsets[e] = first[e];
  if (threadIdx.x == 0) offsets[EXPERTS] = total;
  const int pairs = tokens * TOPK;
  for (int p = threadIdx.x; p < pairs; p += THREADS) {
    const int e = __ldcg(ids + p);
    const int b = p / kPairs;
    sorted[first[e] + counts[b * EXPERTS + e] + __ldcg(ranks + p)] = p;
  }
  if (threadIdx.x == 0) *counter = 0u;  // ready for the next launch
}

}  // namespace onecat
