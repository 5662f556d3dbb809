// Rotary position embedding over a fused qkv projection, NeoX style (rotate-half: element i
// pairs with i + DIM/2), with Qwen3's per-head q/k RMSNorm first when QK_NORM:
//   n = fp16(x · rsqrt(mean(x²) + eps)); x = fp16(n · w)        (transformers' two roundings)
//   out_i = fp16(x_i·c_i − x_{i+DIM/2}·s_i),  out_{i+DIM/2} = fp16(x_{i+DIM/2}·c_i + x_i·s_i)
// with (c_i, s_i) = attention_factor · (cos, sin)(fp32(position · inv_freq[i])), all in fp32.
// V is copied. Outputs: q [tokens][HEADS][DIM]; K and V [tokens][KV_HEADS][DIM] (dense), or
// into the paged cache at slot_mapping[t] through attention's kv_store (PAGED; a negative slot
// skips the token's K and V), which also makes fp8 codes exactly as kv_write does.
//
// A CTA takes TOKENS tokens. It first fills a shared table of their (c, s) pairs, so each
// sin/cos is computed once per token rather than once per head. Then a head vector (one of the
// HEADS + 2·KV_HEADS slots of a token) goes to a group of kLanes consecutive lanes, lane j
// holding the VEC pairs j·VEC … j·VEC + VEC − 1 (two VEC·2-byte loads); the group is a power of
// two ≤ 32, so it lies within one warp and the norm's sum is a shuffle.
#pragma once
#include "attention/kv_write.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/reduce.cuh"

namespace onecat {

// cos and sin of an fp32 angle of any size a position times a frequency reaches (up to ~10^6
// radians), to within a few fp32 units: the angle in half-turns is reduced modulo 2 in double
// (the angle is exact there, 1/π carries 2^-53, so the remainder is good to ~2^-37), and
// sincospif of the remainder needs no large-argument reduction (sincosf's Payne–Hanek path
// would put an array in local memory).
__device__ __forceinline__ void rope_cos_sin(float angle, float& c, float& s) {
  double half_turns = double(angle) * 0.318309886183790671537767526745;  // 1/π
  half_turns -= 2.0 * rint(0.5 * half_turns);
  sincospif(float(half_turns), &s, &c);
}

struct RopeCosSin {
  float c, s;
};

template <int HEADS, int KV_HEADS, int DIM, bool QK_NORM, bool PAGED, int PAGE, int KV, bool SCALE_PER_HEAD, int VEC,
          int THREADS, int TOKENS>
__global__ void __launch_bounds__(THREADS)
    rope_kernel(const half_t* __restrict__ qkv, const int* __restrict__ positions, const float* __restrict__ inv_freq,
                float attention_factor, const half_t* __restrict__ q_norm, const half_t* __restrict__ k_norm, float eps,
                half_t* __restrict__ q, void* __restrict__ k_out, void* __restrict__ v_out,
                const int* __restrict__ slot_mapping, const float* __restrict__ k_scale,
                const float* __restrict__ v_scale, int tokens, int positions_from_host) {
  constexpr int kHalf = DIM / 2;
  constexpr int kChunks = kHalf / VEC;  // working lanes per head
  constexpr int kLanes = kChunks <= 1    ? 1
                         : kChunks <= 2  ? 2
                         : kChunks <= 4  ? 4
                         : kChunks <= 8  ? 8
                         : kChunks <= 16 ? 16
                                         : 32;
  constexpr int kSlots = HEADS + 2 * KV_HEADS;
  constexpr int kJobs = TOKENS * kSlots * kLanes;
  constexpr int kIters = (kJobs + THREADS - 1) / THREADS;
  constexpr int kBytes = VEC * 2;
  static_assert(kHalf % VEC == 0 && kChunks <= kWarpSize, "a head's pairs fill at most one warp");
  static_assert(THREADS % kWarpSize == 0, "whole warps: a head's lanes never straddle two");

  // Before the wait for the kernel before this one (common/grid.cuh; sm_90+): the norms' weights
  // are asked into L2, and where the launch says positions came from the host
  // (rope::Args::positions_from_host) the cos/sin table is built, off the path that waits for qkv.
  if constexpr (QK_NORM) {
    for (int i = threadIdx.x; i < 2 * (DIM * 2 / 128); i += THREADS)
      grid_dependency_prefetch_l2((i % 2 == 0 ? q_norm : k_norm) + (i / 2) * 64);
  }
  const bool early_table = positions_from_host != 0;
  if (!early_table) {
    grid_dependency_sync();
  }
  __shared__ RopeCosSin table[TOKENS][kHalf];
  const int token0 = blockIdx.x * TOKENS;
  for (int i = threadIdx.x; i < TOKENS * kHalf; i += THREADS) {
    const int t = token0 + i / kHalf;
    float c = 0.f, s = 0.f;
    if (t < tokens) rope_cos_sin(float(positions[t]) * inv_freq[i % kHalf], c, s);
    table[i / kHalf][i % kHalf] = RopeCosSin{c * attention_factor, s * attention_factor};
  }
  if (early_table) grid_dependency_sync();
  __syncthreads();

  // Every thread runs every iteration (the norm's shuffles need whole warps); a lane past its
  // head's pairs or a token past the end computes on zeros and stores nothing.
#pragma unroll 1
  for (int it = 0; it < kIters; ++it) {
    const int job = it * THREADS + threadIdx.x;
    const int unit = job / kLanes, lane = job % kLanes;
    const int tt = unit / kSlots, slot = unit % kSlots;
    const int t = token0 + tt;
    const bool active = job < kJobs && t < tokens && lane < kChunks;
    const bool is_q = slot < HEADS, is_v = slot >= HEADS + KV_HEADS;
    const half_t* src = qkv + ((long long)t * kSlots + slot) * DIM + lane * VEC;

    Chunk<kBytes> lo{}, hi{};
    if (active) {
      lo = gmem_load_nc<kBytes>(src);
      hi = gmem_load_nc<kBytes>(src + kHalf);
    }
    float x[2][VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      x[0][e] = half_to_float(half_t{lo.h[e]});
      x[1][e] = half_to_float(half_t{hi.h[e]});
    }
    float inv_rms = 1.f;
    if constexpr (QK_NORM) {
      // Every lane sums, V heads too (their result unused): the shuffle is one instruction
      // that the whole warp reaches.
      float sum_sq = 0.f;
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum_sq += x[0][e] * x[0][e] + x[1][e] * x[1][e];
      sum_sq = group_sum<kLanes>(sum_sq);
      inv_rms = rsqrtf(sum_sq * (1.f / DIM) + eps);
    }
    if (!is_v) {
      if constexpr (QK_NORM) {
        Chunk<kBytes> w_lo{}, w_hi{};
        if (active) {
          const half_t* w = (is_q ? q_norm : k_norm) + lane * VEC;
          w_lo = gmem_load_nc<kBytes>(w);
          w_hi = gmem_load_nc<kBytes>(w + kHalf);
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float n0 = half_to_float(float_to_half(x[0][e] * inv_rms));
          const float n1 = half_to_float(float_to_half(x[1][e] * inv_rms));
          x[0][e] = half_to_float(float_to_half(n0 * half_to_float(half_t{w_lo.h[e]})));
          x[1][e] = half_to_float(float_to_half(n1 * half_to_float(half_t{w_hi.h[e]})));
        }
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const RopeCosSin cs = table[tt < TOKENS ? tt : 0][lane * VEC + e < kHalf ? lane * VEC + e : 0];
        lo.h[e] = float_to_half(x[0][e] * cs.c - x[1][e] * cs.s).bits;
        hi.h[e] = float_to_half(x[1][e] * cs.c + x[0][e] * cs.s).bits;
      }
    }
    if (!active) continue;

    if (is_q) {
      half_t* dst = q + ((long long)t * HEADS + slot) * DIM + lane * VEC;
      gmem_store<kBytes>(dst, lo);
      gmem_store<kBytes>(dst + kHalf, hi);
      continue;
    }
    const int kvh = is_v ? slot - HEADS - KV_HEADS : slot - HEADS;
    void* out = is_v ? v_out : k_out;
    if constexpr (PAGED) {
      const int cache_slot = slot_mapping[t];
      if (cache_slot < 0) continue;
      float scale = 1.f;
      if constexpr (KV != kKvF16) scale = (is_v ? v_scale : k_scale)[SCALE_PER_HEAD ? kvh : 0];
      const long long at = kv_cache_offset<KV_HEADS, DIM, PAGE>(cache_slot, kvh) + lane * VEC;
      kv_store<KV, VEC>(out, at, lo, scale);
      kv_store<KV, VEC>(out, at + kHalf, hi, scale);
    } else {
      half_t* dst = static_cast<half_t*>(out) + ((long long)t * KV_HEADS + kvh) * DIM + lane * VEC;
      gmem_store<kBytes>(dst, lo);
      gmem_store<kBytes>(dst + kHalf, hi);
    }
  }
}

}  // namespace onecat
