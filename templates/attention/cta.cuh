// What the two attention kernels (WMMA attention.cuh, m16n8k16 attention_sm80.cuh) share
// outside their math: which rows and keys a CTA owns, its query tile, the K/V decode factors,
// and the split-KV merge by the last CTA of a (sequence, KV head, row block).
#pragma once
#include "attention/kv_format.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"

namespace onecat {

// A CTA's work: BM query rows of sequence b from row0 (row r: token r / G, query head r % G),
// the key range [lo, hi) their positions see (causal, sliding window), and this split's tiles
// [tile_begin, tile_end) of BN keys. blockIdx: x row block (prefill: longest causal rows
// first), y KV head, z sequence · SPLIT + split.
struct AttnCta {
  int b, split, rb, tok0, q_len, row0, seq_len, lo, hi, tile_begin, tile_end;
};

// False when the CTA has no query rows (the whole CTA returns, its splits alike).
template <int G, int BM, int BN, int QLEN, bool CAUSAL, int WINDOW, int SPLIT>
__device__ __forceinline__ bool attn_cta(const int* __restrict__ seq_lens, const int* __restrict__ cu_q, AttnCta& c) {
  c.b = blockIdx.z / SPLIT, c.split = blockIdx.z % SPLIT;
  c.rb = QLEN ? blockIdx.x : gridDim.x - 1 - blockIdx.x;
  if constexpr (QLEN == 0) {
    c.tok0 = cu_q[c.b];
    c.q_len = cu_q[c.b + 1] - c.tok0;
  } else {
    c.tok0 = c.b * QLEN;
    c.q_len = QLEN;
  }
  c.row0 = c.rb * BM;
  if (c.row0 >= c.q_len * G) return false;
  c.seq_len = seq_lens[c.b];
  const int t_first = c.row0 / G, t_last = min(c.q_len - 1, (c.row0 + BM - 1) / G);
  const int pos0 = c.seq_len - c.q_len;  // position of query token 0
  c.hi = CAUSAL ? min(c.seq_len, pos0 + t_last + 1) : c.seq_len;
  c.lo = WINDOW > 0 ? max(0, pos0 + t_first - WINDOW + 1) : 0;
  if (c.hi < c.lo) c.hi = c.lo;
  const int n_tiles = (c.hi - c.lo + BN - 1) / BN;
  const int per_split = (n_tiles + SPLIT - 1) / SPLIT;
  c.tile_begin = min(n_tiles, c.split * per_split), c.tile_end = min(n_tiles, c.tile_begin + per_split);
  return true;
}

// The CTA's BM×D query tile, in 16-byte parts of 8 halves: row r is token c.row0 + r / G's
// query head kvh·G + (c.row0 + r) % G; rows past the sequence's queries are zero. Part `part`
// of row r goes to dst(r, part), a Chunk<16>* in shared memory (the kernel's own layout);
// with negate, as -Q (exact: the sign bits flip).
template <int HEADS, int G, int D, int BM, int THREADS, class Dst>
__device__ __forceinline__ void attn_load_q(const half_t* __restrict__ q, const AttnCta& c, int kvh, int tid, Dst dst,
                                            bool negate = false) {
  for (int i = tid; i < BM * (D / 8); i += THREADS) {
    const int r = i / (D / 8), part = i % (D / 8);
    const int t = (c.row0 + r) / G, h = (c.row0 + r) % G;
    Chunk<16> v{};
    if (t < c.q_len) v = gmem_load_nc<16>(q + ((long long)(c.tok0 + t) * HEADS + kvh * G + h) * D + part * 8);
    if (negate) {
#pragma unroll
      for (int e = 0; e < 8; ++e) v.h[e] ^= 0x8000u;
    }
    *dst(r, part) = v;
  }
}

// What a decoded K and V element is multiplied by: the format's decode factor, times the
// tensor's or KV head kvh's scale for fp8.
template <int KV, bool SCALE_PER_HEAD>
__device__ __forceinline__ void attn_kv_factors(const float* __restrict__ k_scale, const float* __restrict__ v_scale,
                                                int kvh, float& k_factor, float& v_factor) {
  k_factor = KvFormat<KV>::kDecodeFactor, v_factor = KvFormat<KV>::kDecodeFactor;
  if constexpr (KV != kKvF16) {
    k_factor *= k_scale[SCALE_PER_HEAD ? kvh : 0];
    v_factor *= v_scale[SCALE_PER_HEAD ? kvh : 0];
  }
}

// The split-KV workspace of the CTA's (sequence, KV head, row block) slot in partial:
// [SPLIT][BM][D] partial O, then [SPLIT][BM][2] (max, sum). Returns the slot's index.
template <int KVH, int G, int D, int BM, int QLEN, int SPLIT>
__device__ __forceinline__ long long attn_split_slot(float* partial, const AttnCta& c, int kvh, float*& part_o,
                                                     float*& part_ml) {
  constexpr int kRowBlocks = (QLEN * G + BM - 1) / BM;
  const long long slot = ((long long)c.b * KVH + kvh) * kRowBlocks + c.rb;
  part_o = partial + slot * SPLIT * BM * (D + 2);
  part_ml = part_o + SPLIT * BM * D;
  return slot;
}

// After every split wrote its partials of the slot — part_o [SPLIT][BM][D] O (scaled to its
// row max) and part_ml [SPLIT][BM][2] (max, sum) — the last CTA to finish merges them in fp32
// and writes fp16 rows (times v_factor / sum; rows that saw no key: 0) and resets the slot's
// counter for the next launch. `flag` is a shared int the caller can spare.
template <int HEADS, int KVH, int G, int D, int BM, int SPLIT, int THREADS>
__device__ __forceinline__ void attn_merge_splits(half_t* __restrict__ out, const float* part_o, const float* part_ml,
                                                  int* __restrict__ counters, long long slot, int* flag,
                                                  const AttnCta& c, int kvh, float v_factor) {
  const float kNegInf = __int_as_float(0xff800000);
  const int tid = threadIdx.x;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    *flag = atomicAdd(counters + slot, 1) == SPLIT - 1;
    if (*flag) counters[slot] = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!*flag) return;
  __threadfence();
  for (int i = tid; i < BM * (D / 8); i += THREADS) {
    const int r = i / (D / 8), part = i % (D / 8);
    const int row = c.row0 + r, t = row / G, h = row % G;
    if (t >= c.q_len) continue;
    float mx = kNegInf;
#pragma unroll 4
    for (int s = 0; s < SPLIT; ++s) mx = fmaxf(mx, __ldcg(part_ml + (s * BM + r) * 2));
    float acc[8] = {}, total = 0.f;
#pragma unroll 4
    for (int s = 0; s < SPLIT; ++s) {
      const float ms = __ldcg(part_ml + (s * BM + r) * 2);
      if (ms == kNegInf) continue;
      const float f = exp2f(ms - mx);
      total += __ldcg(part_ml + (s * BM + r) * 2 + 1) * f;
      const float* src = part_o + (s * BM + r) * D + part * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += __ldcg(src + e) * f;
    }
    const float inv = total > 0.f ? v_factor / total : 0.f;
    Chunk<16> v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.h[e] = float_to_half(acc[e] * inv).bits;
    gmem_store<16>(out + ((long long)(c.tok0 + t) * HEADS + kvh * G + h) * D + part * 8, v);
  }
}

}  // namespace onecat
