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
// first), y KV head, z sequence · SPLIT + split. Of the SPLIT CTAs of a row block only the
// first n_splits take keys: a split gets at least MINKEYS of them (kSplitMinKeys unless the
// config's mk says otherwise), so a short context runs on fewer splits (one: no partials, no
// merge) than a long one.
struct AttnCta {
  int b, split, rb, tok0, q_len, row0, seq_len, lo, hi, tile_begin, tile_end, n_splits;
};

// Below this many keys per split, a split's fixed cost (query tile, partials, its share of
// the merge) outweighs the keys it streams: an H200 batch-1 verify over 1K keys took 24.7 µs
// on 16 splits of 64 keys and 13.8 µs on 4 of 256 (bench/RESULTS.md, 2026-12-01). Must equal
// codegen/attention/config.h's Config::kDefaultMinKeys.
// inline: a plain namespace-scope constexpr has internal linkage, and NVRTC emits it under a
// symbol named after the compiling process, which made every cubin differ (docs/codegen.md).
inline constexpr int kSplitMinKeys = 256;

// False when the CTA has no query rows, or its split no keys (the whole CTA returns).
template <int G, int BM, int BN, int QLEN, bool CAUSAL, int WINDOW, int SPLIT, int MINKEYS>
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
  constexpr int kMinTiles = SPLIT == 1 ? 1 : (MINKEYS + BN - 1) / BN;
  const int per_split = max(kMinTiles, (n_tiles + SPLIT - 1) / SPLIT);
  c.n_splits = max(1, (n_tiles + per_split - 1) / per_split);
  if (c.split >= c.n_splits) return false;
  c.tile_begin = c.split * per_split, c.tile_end = min(n_tiles, c.tile_begin + per_split);
  return true;
}

// The CTA's BM×D query tile, in 16-byte parts of 8 halves: row r is token c.row0 + r / G's
// query head kvh·G + (c.row0 + r) % G; rows past the sequence's queries are zero. Part `part`
// of row r goes to dst(r, part), a Chunk<16>* in shared memory (the kernel's own layout);
// with negate, as -Q (exact: the sign bits flip). BATCH > 1: a thread's parts load in unrolled
// batches of BATCH, every load of a batch issued before the first store waits on it (one round
// trip a batch, not one a part; the m16n8k16 kernel's); 1: one part after the other (the WMMA
// kernel's: batches made its bm=64 configs spill on sm_70).
template <int HEADS, int G, int D, int BM, int THREADS, int BATCH = 1, class Dst>
__device__ __forceinline__ void attn_load_q(const half_t* __restrict__ q, const AttnCta& c, int kvh, int tid, Dst dst,
                                            bool negate = false) {
  if constexpr (BATCH == 1) {
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
  } else {
    constexpr int kParts = D / 8, kTotal = BM * kParts;
    constexpr int kPer = (kTotal + THREADS - 1) / THREADS, kBatch = kPer < BATCH ? kPer : BATCH;
#pragma unroll
    for (int k0 = 0; k0 < kPer; k0 += kBatch) {
      Chunk<16> v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = tid + (k0 + k) * THREADS;
        const int r = i / kParts, part = i % kParts;
        const int t = (c.row0 + r) / G, h = (c.row0 + r) % G;
        v[k] = Chunk<16>{};
        if (k0 + k < kPer && i < kTotal && t < c.q_len)
          v[k] = gmem_load_nc<16>(q + ((long long)(c.tok0 + t) * HEADS + kvh * G + h) * D + part * 8);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = tid + (k0 + k) * THREADS;
        if (k0 + k >= kPer || i >= kTotal) break;
        if (negate) {  // the sign bits, a word at a time
          unsigned* w = reinterpret_cast<unsigned*>(v[k].h);
#pragma unroll
          for (int e = 0; e < 4; ++e) w[e] ^= 0x80008000u;
        }
        *dst(i / kParts, i % kParts) = v[k];
      }
    }
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

// After each of the slot's c.n_splits (≥ 2) splits wrote its partials — part_o [SPLIT][BM][D]
// O (scaled to its row max) and part_ml [SPLIT][BM][2] (max, sum) — the last CTA to finish merges them in fp32
// and writes fp16 rows (times v_factor / sum; rows that saw no key: 0) and resets the slot's
// counter for the next launch. `flag` is a shared int the caller can spare; `scratch` is the
// kernel's shared memory, free once every thread is past the key loop (the Q tile alone,
// BM × D halves, holds the BM × SPLIT weights). The merge runs on one CTA after the others:
// each thread first reads a row's SPLIT (max, sum) pairs at once and leaves the row's weights
// 2^(max_s − max) · v_factor / sum in shared memory, then its output chunks' loads are
// independent across chunks and splits (a row-by-row merge paid about 2·SPLIT dependent L2
// round trips per chunk; docs/attention.md).
template <int HEADS, int KVH, int G, int D, int BM, int SPLIT, int THREADS, int QLEN>
__device__ __forceinline__ void attn_merge_splits(half_t* __restrict__ out, const float* part_o, const float* part_ml,
                                                  int* __restrict__ counters, long long slot, int* flag, float* scratch,
                                                  const AttnCta& c, int kvh, float v_factor) {
  static_assert(SPLIT * 4 <= D * 2, "the weights fit in the Q tile's shared memory");
  static_assert(BM <= THREADS, "a thread per row");
  // Rows of a row block that can hold a query: decode and verify know it (QLEN·G, e.g. 4 of a
  // 16-row block at GQA 4), so the loops below cover those rows only.
  constexpr int kRows = QLEN > 0 && QLEN * G < BM ? QLEN * G : BM;
  const float kNegInf = __int_as_float(0xff800000);
  const int tid = threadIdx.x;
  // Every thread's partials are written (the barrier orders them before thread 0's atomic).
  // The atomic is acq_rel at GPU scope: it releases this CTA's partials (cumulatively, through
  // the barrier) and lets the last CTA acquire every other's, whose threads read them after the
  // next barrier; no sequentially consistent fences (each a MEMBAR.SC with an L1 invalidate).
  __syncthreads();
  if (tid == 0) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(counters + slot) : "memory");
    *flag = old == c.n_splits - 1;
    if (*flag) counters[slot] = 0;  // ready for the next launch
  }
  __syncthreads();
  const bool last = *flag;
  if (!last) return;  // uniform over the CTA
  __syncthreads();  // every thread read the flag before the weights go over it
  float* weight = scratch;  // [SPLIT][BM]
  const int n = c.n_splits;
  if (tid < kRows) {
    const int r = tid;
    if ((c.row0 + r) / G < c.q_len) {
      float2 ml[SPLIT];
#pragma unroll
      for (int s = 0; s < SPLIT; ++s) {
        ml[s] = s < n ? __ldcg(reinterpret_cast<const float2*>(part_ml + (s * BM + r) * 2)) : make_float2(kNegInf, 0.f);
      }
      float mx = kNegInf;
#pragma unroll
      for (int s = 0; s < SPLIT; ++s) mx = fmaxf(mx, ml[s].x);
      float total = 0.f;
#pragma unroll
      for (int s = 0; s < SPLIT; ++s) {
        ml[s].x = ml[s].x == kNegInf ? 0.f : exp2f(ml[s].x - mx);
        total += ml[s].y * ml[s].x;
      }
      const float inv = total > 0.f ? v_factor / total : 0.f;
#pragma unroll
      for (int s = 0; s < SPLIT; ++s) weight[s * BM + r] = ml[s].x * inv;
    }
  }
  __syncthreads();
  constexpr int kParts = D / 8;
  constexpr int kItems = (kRows * kParts + THREADS - 1) / THREADS;  // 16-byte output chunks per thread
  constexpr int kGroup = kItems < 4 ? kItems : 4;                 // merged side by side (registers)
#pragma unroll
  for (int k0 = 0; k0 < kItems; k0 += kGroup) {
    float acc[kGroup][8];
    int row[kGroup];
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      const int i = tid + (k0 + k) * THREADS;
      const int r = i / kParts;
      row[k] = k0 + k >= kItems || i >= kRows * kParts || (c.row0 + r) / G >= c.q_len ? -1 : r;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[k][e] = 0.f;
    }
    // No branch on the weight (a split that saw none of the row's keys wrote O = 0 and has
    // weight 0), so every load of four splits issues before the first returns.
#pragma unroll 4
    for (int s = 0; s < n; ++s) {
#pragma unroll
      for (int k = 0; k < kGroup; ++k) {
        if (row[k] < 0) continue;
        const float w = weight[s * BM + row[k]];
        const int part = (tid + (k0 + k) * THREADS) % kParts;
        const float4* src = reinterpret_cast<const float4*>(part_o + (s * BM + row[k]) * D + part * 8);
        const float4 a = __ldcg(src), b = __ldcg(src + 1);
        acc[k][0] += a.x * w, acc[k][1] += a.y * w, acc[k][2] += a.z * w, acc[k][3] += a.w * w;
        acc[k][4] += b.x * w, acc[k][5] += b.y * w, acc[k][6] += b.z * w, acc[k][7] += b.w * w;
      }
    }
#pragma unroll
    for (int k = 0; k < kGroup; ++k) {
      if (row[k] < 0) continue;
      const int row_abs = c.row0 + row[k], t = row_abs / G, h = row_abs % G;
      const int part = (tid + (k0 + k) * THREADS) % kParts;
      Chunk<16> v;
#pragma unroll
      for (int e = 0; e < 8; ++e) v.h[e] = float_to_half(acc[k][e]).bits;
      gmem_store<16>(out + ((long long)(c.tok0 + t) * HEADS + kvh * G + h) * D + part * 8, v);
    }
  }
}

}  // namespace onecat
