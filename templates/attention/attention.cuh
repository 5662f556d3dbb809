// Paged attention for prefill, decode and verify on the WMMA atom (atom=wmma: sm_70's, runs on
// any arch; docs/attention.md).
//
// A CTA owns BM query rows of one sequence b and one KV head: row r is (token r / G, query
// head r % G), so the G query heads of a KV head share every K/V load (GQA packing). Its key
// range [lo, hi) follows from the rows' positions (causal, sliding window); SPLIT CTAs share
// it in tiles of BN keys and WN warp columns take turns within a CTA. Each warp keeps 16 rows:
//   S = Q·Kᵀ (WMMA, fp32) → shared → online softmax in fp32 by the lanes → P (fp16) → O += P·V
// with O in accumulator fragments, rescaled per row through the atom's row map
// (wmma::acc_rows). K/V tiles go global → registers → shared, the next tile's loads in flight
// during this tile's math (register double buffering: Volta has no cp.async); fp8 codes become
// fp16 on the way and their scales join the softmax scale (K) and the final normalisation (V).
// Warp columns merge in shared memory; splits write fp32 (max, sum, O) partials and the last
// CTA to finish a (sequence, head, row block) merges them and writes the output.
//
// Positions: a sequence holds seq_lens[b] keys (its new tokens included: kv_write ran
// first); its q_len query tokens are the last q_len positions. Rows that see no key (padding
// rows, or seq_lens[b] = 0) produce zeros, never NaN.
//
// The kernel (at the end of the file) is the algorithm's outline; each step is a device
// function over AttnWmmaShape, the kernel's compile-time shape: load K/V tiles into registers,
// store them to shared memory, S = Q·Kᵀ, mask and online softmax, O += P·V, merge the warp
// columns, store the rows or the split partials.
#pragma once
#include "attention/cta.cuh"
#include "attention/kv_format.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"
#include "common/wmma_atom.cuh"

namespace onecat {

// The compile-time shape of one attention_kernel: its template arguments and what follows
// from them. Enumerators, not static constexpr members: NVRTC gives each of those a global in
// the module.
template <int HEADS_, int KVH_, int D_, int PAGE_, int KV_, bool SCALE_PER_HEAD_, bool CAUSAL_, int WINDOW_, int QLEN_,
          int BM_, int BN_, int WN_, int SPLIT_>
struct AttnWmmaShape {
  enum : int {
    HEADS = HEADS_,
    KVH = KVH_,
    D = D_,
    PAGE = PAGE_,
    KV = KV_,
    SCALE_PER_HEAD = SCALE_PER_HEAD_,
    CAUSAL = CAUSAL_,
    WINDOW = WINDOW_,
    QLEN = QLEN_,
    BM = BM_,
    BN = BN_,
    WN = WN_,
    SPLIT = SPLIT_,
    G = HEADS / KVH,
    WM = BM / 16,
    kWarps = WM * WN,
    kThreads = kWarps * 32,
    kLd = D + 8,                           // halves per shared row of Q, K and V (rows spread over banks)
    kSld = BN + 4,                         // floats per shared row of S
    kPld = BN + 8,                         // halves per shared row of P (written over the warp's S)
    kFd = D / 16,                          // output fragments per warp
    kFn = BN / 16,                         // score fragments per warp
    kCpr = D * KvFormat<KV>::kBytes / 16,  // 16-byte chunks per cached row
    kTileChunks = WN * BN * kCpr,
    kChunksPerThread = (kTileChunks + kThreads - 1) / kThreads,
    kTileBytes = BM * kLd * 2 + 2 * WN * BN * kLd * 2,
    kMergeBytes = WN > 1 ? BM* D * 4 : 0,
    kRegionBytes = kTileBytes > kMergeBytes ? kTileBytes : kMergeBytes,
    kSmemBytes = kRegionBytes + kWarps * 16 * kSld * 4 + kWarps * 16 * 3 * 4,
  };
  static_assert(kPld * 2 <= kSld * 4, "P fits over S");
};

// The kernel's dynamic shared memory: the Q tile and the WN warp columns' K and V tiles (after
// the key loop: the warp columns' O, [BM][D] floats), then per warp its S (P written over it)
// and its alpha[16], m[16], l[16].
template <class S>
struct AttnWmmaSmem {
  half_t* q;
  half_t* k;
  half_t* v;
  float* merge;
  float* s_all;
  float* stats;
  __device__ __forceinline__ explicit AttnWmmaSmem(unsigned char* smem)
      : q(reinterpret_cast<half_t*>(smem)),
        k(q + S::BM * S::kLd),
        v(k + S::WN * S::BN * S::kLd),
        merge(reinterpret_cast<float*>(smem)),
        s_all(reinterpret_cast<float*>(smem + S::kRegionBytes)),
        stats(s_all + S::kWarps * 16 * S::kSld) {}
};

// The K/V chunks of the next tiles, in flight in registers during this tile's math.
template <class S>
struct AttnWmmaPrefetch {
  Chunk<16> k[S::kChunksPerThread], v[S::kChunksPerThread];
};

// The softmax lanes: lane pair (2r, 2r+1) owns row r of the warp, columns in pairs, and the
// keys [lo, hi) the row sees.
struct AttnWmmaRowLane {
  int r, half;
  int hi, lo;
};

// K/V tiles of iteration `it` (tiles tile_begin + it·WN ..) global → registers: chunk c of the
// CTA's WN tiles is (warp column, key, 16-byte part); keys past the range are zero.
template <class S>
__device__ __forceinline__ void attn_wmma_load_tiles(AttnWmmaPrefetch<S>& pf, const void* __restrict__ k_cache,
                                                     const void* __restrict__ v_cache, const int* table,
                                                     const AttnCta& cta, int kvh, int tid, int it) {
#pragma unroll
  for (int i = 0; i < S::kChunksPerThread; ++i) {
    const int c = tid + i * S::kThreads;
    const int g = c / (S::BN * S::kCpr), key = (c / S::kCpr) % S::BN, part = c % S::kCpr;
    const int tile = cta.tile_begin + it * S::WN + g;
    const int j = cta.lo + tile * S::BN + key;
    pf.k[i] = Chunk<16>{};
    pf.v[i] = Chunk<16>{};
    if (c < S::kTileChunks && tile < cta.tile_end && j < cta.hi) {
      const long long row = ((long long)table[j / S::PAGE] * S::KVH + kvh) * S::PAGE + j % S::PAGE;
      const long long off = row * (S::D * KvFormat<S::KV>::kBytes) + part * 16;
      pf.k[i] = gmem_load_nc<16>(static_cast<const char*>(k_cache) + off);
      pf.v[i] = gmem_load_nc<16>(static_cast<const char*>(v_cache) + off);
    }
  }
}

// The prefetched chunks registers → the shared K and V tiles; fp8: 16 codes → two chunks of 8
// halves, four codes (one word) per conversion.
template <class S>
__device__ __forceinline__ void attn_wmma_store_tiles(const AttnWmmaPrefetch<S>& pf, const AttnWmmaSmem<S>& sm,
                                                      int tid) {
#pragma unroll
  for (int i = 0; i < S::kChunksPerThread; ++i) {
    const int c = tid + i * S::kThreads;
    if (c >= S::kTileChunks) continue;
    const int g = c / (S::BN * S::kCpr), key = (c / S::kCpr) % S::BN, part = c % S::kCpr;
    const int at = (g * S::BN + key) * S::kLd + part * 16 / KvFormat<S::KV>::kBytes;
    if constexpr (S::KV == kKvF16) {
      *reinterpret_cast<Chunk<16>*>(sm.k + at) = pf.k[i];
      *reinterpret_cast<Chunk<16>*>(sm.v + at) = pf.v[i];
    } else {
      Chunk<16> klo, khi, vlo, vhi;
      const unsigned* kw = reinterpret_cast<const unsigned*>(pf.k[i].h);
      const unsigned* vw = reinterpret_cast<const unsigned*>(pf.v[i].h);
      unsigned* klo_w = reinterpret_cast<unsigned*>(klo.h);
      unsigned* khi_w = reinterpret_cast<unsigned*>(khi.h);
      unsigned* vlo_w = reinterpret_cast<unsigned*>(vlo.h);
      unsigned* vhi_w = reinterpret_cast<unsigned*>(vhi.h);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        attn_fp8x4_to_half2x2<S::KV>(kw[j], klo_w[2 * j], klo_w[2 * j + 1]);
        attn_fp8x4_to_half2x2<S::KV>(kw[2 + j], khi_w[2 * j], khi_w[2 * j + 1]);
        attn_fp8x4_to_half2x2<S::KV>(vw[j], vlo_w[2 * j], vlo_w[2 * j + 1]);
        attn_fp8x4_to_half2x2<S::KV>(vw[2 + j], vhi_w[2 * j], vhi_w[2 * j + 1]);
      }
      *reinterpret_cast<Chunk<16>*>(sm.k + at) = klo;
      *reinterpret_cast<Chunk<16>*>(sm.k + at + 8) = khi;
      *reinterpret_cast<Chunk<16>*>(sm.v + at) = vlo;
      *reinterpret_cast<Chunk<16>*>(sm.v + at + 8) = vhi;
    }
  }
}

// S = Q·Kᵀ for the warp's 16 rows (Q from qw) and BN keys (K from kt) → the warp's S in
// shared memory (ss, rows of kSld floats).
template <class S>
__device__ __forceinline__ void attn_wmma_scores(float* ss, const half_t* qw, const half_t* kt) {
  wmma::Acc s[S::kFn];
#pragma unroll
  for (int j = 0; j < S::kFn; ++j) wmma::zero(s[j]);
#pragma unroll 1  // unrolled, ptxas hoists every K fragment and spills at D=128
  for (int kk = 0; kk < S::kFd; ++kk) {
    wmma::Frag a;
    wmma::load_a(a, qw + kk * 16, S::kLd);
#pragma unroll
    for (int j = 0; j < S::kFn; ++j) {
      wmma::Frag bf;
      wmma::load_b<wmma::Layout::kCol>(bf, kt + j * 16 * S::kLd + kk * 16, S::kLd);
      wmma::mma<wmma::Layout::kCol>(s[j], a, bf);
    }
  }
#pragma unroll
  for (int j = 0; j < S::kFn; ++j) wmma::store_acc(ss + j * 16, S::kSld, s[j]);
  __syncwarp();
}

// The mask and the online softmax of the tile from key0, in the log2 domain, by the row's lane
// pair: reads the row of S (ss), writes P (fp16, rows of kPld halves) over it, moves the row's
// max and sum on and returns the factor O's row must take. (P's address is derived here: passed
// as a second pointer, the compiler addressed S differently and ptxas spilled at D = 256.)
template <class S>
__device__ __forceinline__ float attn_wmma_online_softmax(float* ss, const AttnWmmaRowLane& rl, float& m_run,
                                                          float& l_run, int key0, float qk_scale) {
  const float kNegInf = __int_as_float(0xff800000);
  half_t* ps = reinterpret_cast<half_t*>(ss);
  float p[S::BN / 2];
  float tmax = kNegInf;
#pragma unroll
  for (int k = 0; k < S::BN / 4; ++k) {
    const int c = 4 * k + 2 * rl.half;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int j = key0 + c + u;
      const bool visible = j < rl.hi && j >= rl.lo;
      const float v = visible ? ss[rl.r * S::kSld + c + u] * qk_scale : kNegInf;
      p[2 * k + u] = v;
      tmax = fmaxf(tmax, v);
    }
  }
  tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
  const float m_new = fmaxf(m_run, tmax);
  const float base = m_new == kNegInf ? 0.f : m_new;
  const float alpha = m_run == kNegInf ? 0.f : exp2f(m_run - base);
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < S::BN / 2; ++k) {
    p[k] = exp2f(p[k] - base);
    sum += p[k];
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  l_run = l_run * alpha + sum;
  m_run = m_new;
  __syncwarp();  // every lane has read S before P overwrites it
#pragma unroll
  for (int k = 0; k < S::BN / 4; ++k) {
    const int c = 4 * k + 2 * rl.half;
    const half_t lo16 = float_to_half(p[2 * k]), hi16 = float_to_half(p[2 * k + 1]);
    *reinterpret_cast<unsigned*>(ps + rl.r * S::kPld + c) = unsigned(lo16.bits) | (unsigned(hi16.bits) << 16);
  }
  return alpha;
}

// Each O row times its factor (row_factor[r], the warp's shared scratch), through the lane →
// row map of the accumulators.
template <class S>
__device__ __forceinline__ void attn_wmma_scale_o_rows(wmma::Acc (&o)[S::kFd], const float* row_factor,
                                                       const int (&acc_row)[8]) {
  float f[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] = row_factor[acc_row[e]];
#pragma unroll
  for (int j = 0; j < S::kFd; ++j) {
#pragma unroll
    for (int e = 0; e < 8; ++e) o[j].v[e] *= f[e];
  }
}

// O += P·V for the warp's 16 rows (P from ps) and BN keys (V from vt).
template <class S>
__device__ __forceinline__ void attn_wmma_pv(wmma::Acc (&o)[S::kFd], const half_t* ps, const half_t* vt) {
#pragma unroll
  for (int kk = 0; kk < S::kFn; ++kk) {
    wmma::Frag a;
    wmma::load_a(a, ps + kk * 16, S::kPld);
#pragma unroll
    for (int j = 0; j < S::kFd; ++j) {
      wmma::Frag bf;
      wmma::load_b<wmma::Layout::kRow>(bf, vt + kk * 16 * S::kLd + j * 16, S::kLd);
      wmma::mma<wmma::Layout::kRow>(o[j], a, bf);
    }
  }
}

// After the key loop: the warp columns meet. Each row's common max and total sum go to
// row_max / row_sum (the row's lane pair), every warp rescales its O to that max and warp
// column 0 ends with the sum of every column's O.
template <class S>
__device__ __forceinline__ void attn_wmma_merge_warp_columns(wmma::Acc (&o)[S::kFd], float& row_max, float& row_sum,
                                                             const AttnWmmaSmem<S>& sm, const AttnWmmaRowLane& rl,
                                                             const int (&acc_row)[8], float m_run, float l_run,
                                                             int warp, int wm, int wn) {
  const float kNegInf = __int_as_float(0xff800000);
  float* alpha_s = sm.stats + warp * 48;
  float* m_s = alpha_s + 16;
  float* l_s = m_s + 16;
  if (rl.half == 0) {
    m_s[rl.r] = m_run;
    l_s[rl.r] = l_run;
  }
  __syncthreads();
  row_max = kNegInf, row_sum = 0.f;
#pragma unroll
  for (int w = 0; w < S::WN; ++w) row_max = fmaxf(row_max, sm.stats[(w * S::WM + wm) * 48 + 16 + rl.r]);
#pragma unroll
  for (int w = 0; w < S::WN; ++w) {
    const float mw = sm.stats[(w * S::WM + wm) * 48 + 16 + rl.r];
    row_sum += mw == kNegInf ? 0.f : sm.stats[(w * S::WM + wm) * 48 + 32 + rl.r] * exp2f(mw - row_max);
  }
  if constexpr (S::WN > 1) {
    __syncwarp();
    if (rl.half == 0) alpha_s[rl.r] = m_run == kNegInf ? 0.f : exp2f(m_run - row_max);
    __syncwarp();
    attn_wmma_scale_o_rows<S>(o, alpha_s, acc_row);
#pragma unroll 1
    for (int w = 1; w < S::WN; ++w) {
      if (wn == w) {
#pragma unroll
        for (int j = 0; j < S::kFd; ++j) wmma::store_acc(sm.merge + wm * 16 * S::D + j * 16, S::D, o[j]);
      }
      __syncthreads();
      if (wn == 0) {
#pragma unroll
        for (int j = 0; j < S::kFd; ++j) {
          wmma::Acc other;
          wmma::load_acc(other, sm.merge + wm * 16 * S::D + j * 16, S::D);
#pragma unroll
          for (int e = 0; e < 8; ++e) o[j].v[e] += other.v[e];
        }
      }
      __syncthreads();
    }
  }
}

// Warp column 0 of a single split: out = O / sum · v_factor, through the warp's scratch ss
// 16×16 at a time (16-byte stores).
template <class S>
__device__ __forceinline__ void attn_wmma_store_rows(half_t* __restrict__ out, const wmma::Acc (&o)[S::kFd], float* ss,
                                                     float* alpha_s, const AttnWmmaRowLane& rl, float row_sum,
                                                     const AttnCta& cta, int kvh, int wm, int lane, float vs_factor) {
  __syncwarp();
  if (rl.half == 0) alpha_s[rl.r] = row_sum > 0.f ? vs_factor / row_sum : 0.f;
  __syncwarp();
  const int r = lane / 2, c0 = (lane % 2) * 8;
  const int row = cta.row0 + wm * 16 + r;
  const int t = row / S::G, h = row % S::G;
  const float inv = alpha_s[r];
#pragma unroll
  for (int j = 0; j < S::kFd; ++j) {
    wmma::store_acc(ss, S::kSld, o[j]);
    __syncwarp();
    Chunk<16> v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.h[e] = float_to_half(ss[r * S::kSld + c0 + e] * inv).bits;
    if (t < cta.q_len) {
      gmem_store<16>(out + ((long long)(cta.tok0 + t) * S::HEADS + kvh * S::G + h) * S::D + j * 16 + c0, v);
    }
    __syncwarp();
  }
}

template <int HEADS, int KVH, int D, int PAGE, int KV, bool SCALE_PER_HEAD, bool CAUSAL, int WINDOW, int QLEN, int BM,
          int BN, int WN, int SPLIT, int SMEM_BYTES, int MINKEYS = kSplitMinKeys>
__global__ void __launch_bounds__(BM / 16 * WN * 32)
    attention_kernel(half_t* __restrict__ out, const half_t* __restrict__ q, const void* __restrict__ k_cache,
                     const void* __restrict__ v_cache, const float* __restrict__ k_scale,
                     const float* __restrict__ v_scale, const int* __restrict__ block_table, int max_pages,
                     const int* __restrict__ seq_lens, const int* __restrict__ cu_q, float sm_scale,
                     float* __restrict__ partial, int* __restrict__ counters, int /*tables_from_host*/) {
  grid_dependency_sync();
  using S = AttnWmmaShape<HEADS, KVH, D, PAGE, KV, SCALE_PER_HEAD, CAUSAL, WINDOW, QLEN, BM, BN, WN, SPLIT>;
  static_assert(S::kSmemBytes == SMEM_BYTES, "codegen's shared size");
  constexpr int G = S::G, kLd = S::kLd, kSld = S::kSld;
  constexpr float kLog2e = 1.4426950408889634f;
  const float kNegInf = __int_as_float(0xff800000);
  extern __shared__ __align__(128) unsigned char smem[];
  const AttnWmmaSmem<S> sm(smem);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % S::WM, wn = warp / S::WM;
  const int kvh = blockIdx.y;

  // The CTA's rows and keys; a CTA with no rows, or a split with no keys, has nothing to do.
  AttnCta cta;
  if (!attn_cta<G, BM, BN, QLEN, CAUSAL, WINDOW, SPLIT, MINKEYS>(seq_lens, cu_q, cta)) return;
  const int iters = (cta.tile_end - cta.tile_begin + WN - 1) / WN;

  float ks_factor, vs_factor;
  attn_kv_factors<KV, SCALE_PER_HEAD>(k_scale, v_scale, kvh, ks_factor, vs_factor);
  const float qk_scale = sm_scale * ks_factor * kLog2e;

  // Decode and verify load the first K/V tile before the Q tile, so that its page-table and
  // K/V round trips overlap Q's instead of following it (a short CTA's path is a few such round
  // trips); prefill, whose CTAs stream many tiles, loads it after Q, and so does D = 256,
  // whose 128-row configs then spill on sm_70.
  constexpr bool kEarlyTile = QLEN > 0 && D <= 128;
  AttnWmmaPrefetch<S> early[1];
  if constexpr (kEarlyTile) {
    if (iters > 0)
      attn_wmma_load_tiles<S>(early[0], k_cache, v_cache, block_table + (long long)cta.b * max_pages, cta, kvh, tid, 0);
  }
  // Q tile: rows past the sequence's queries are zero.
  attn_load_q<HEADS, G, D, BM, S::kThreads>(
      q, cta, kvh, tid, [&](int r, int part) { return reinterpret_cast<Chunk<16>*>(sm.q + r * kLd + part * 8); });
  const int* table = block_table + (long long)cta.b * max_pages;
  AttnWmmaPrefetch<S> pf;
  if constexpr (kEarlyTile) pf = early[0];

  float* ss = sm.s_all + warp * 16 * kSld;  // the warp's S, and P over it
  half_t* ps = reinterpret_cast<half_t*>(ss);
  float* alpha_s = sm.stats + warp * 48;
  int acc_row[8];
  wmma::acc_rows(acc_row, ss, kSld);
  AttnWmmaRowLane rl;
  rl.r = lane / 2, rl.half = lane % 2;
  const int my_t = (cta.row0 + wm * 16 + rl.r) / G;
  const int my_pos = cta.seq_len - cta.q_len + my_t;
  rl.hi = my_t < cta.q_len ? (CAUSAL ? my_pos + 1 : cta.seq_len) : 0;
  rl.lo = WINDOW > 0 ? my_pos - WINDOW + 1 : 0;
  float m_run = kNegInf, l_run = 0.f;
  wmma::Acc o[S::kFd];
#pragma unroll
  for (int j = 0; j < S::kFd; ++j) wmma::zero(o[j]);

  if (iters > 0) {
    if constexpr (!kEarlyTile) attn_wmma_load_tiles<S>(pf, k_cache, v_cache, table, cta, kvh, tid, 0);
    attn_wmma_store_tiles<S>(pf, sm, tid);
  }
  __syncthreads();
  for (int it = 0; it < iters; ++it) {
    if (it + 1 < iters) attn_wmma_load_tiles<S>(pf, k_cache, v_cache, table, cta, kvh, tid, it + 1);
    const int tile = cta.tile_begin + it * WN + wn;
    // Warp-uniform; a warp whose 16 rows are all padding only helps load.
    if (tile < cta.tile_end && (cta.row0 + wm * 16) / G < cta.q_len) {
      attn_wmma_scores<S>(ss, sm.q + wm * 16 * kLd, sm.k + wn * BN * kLd);
      const float alpha = attn_wmma_online_softmax<S>(ss, rl, m_run, l_run, cta.lo + tile * BN, qk_scale);
      if (rl.half == 0) alpha_s[rl.r] = alpha;
      __syncwarp();
      attn_wmma_scale_o_rows<S>(o, alpha_s, acc_row);
      attn_wmma_pv<S>(o, ps, sm.v + wn * BN * kLd);
      __syncwarp();  // P is read before the next tile's S overwrites it
    }
    __syncthreads();
    if (it + 1 < iters) {
      attn_wmma_store_tiles<S>(pf, sm, tid);
      __syncthreads();
    }
  }

  float row_max, row_sum;  // the lane pair's row, over the warp columns
  attn_wmma_merge_warp_columns<S>(o, row_max, row_sum, sm, rl, acc_row, m_run, l_run, warp, wm, wn);
  if (SPLIT == 1 || cta.n_splits == 1) {  // a short context's single split writes out directly
    if (wn != 0) return;
    attn_wmma_store_rows<S>(out, o, ss, alpha_s, rl, row_sum, cta, kvh, wm, lane, vs_factor);
  } else if constexpr (SPLIT > 1) {
    // Partials of (b, kvh, rb): [SPLIT][BM][D] O and [SPLIT][BM][2] (max, sum), then the
    // last CTA of the slot merges.
    float *part_o, *part_ml;
    const long long slot = attn_split_slot<KVH, G, D, BM, QLEN, SPLIT>(partial, cta, kvh, part_o, part_ml);
    if (wn == 0) {
#pragma unroll
      for (int j = 0; j < S::kFd; ++j) wmma::store_acc(part_o + (cta.split * BM + wm * 16) * D + j * 16, D, o[j]);
      if (rl.half == 0) {
        part_ml[(cta.split * BM + wm * 16 + rl.r) * 2] = row_max;
        part_ml[(cta.split * BM + wm * 16 + rl.r) * 2 + 1] = row_sum;
      }
    }
    // The stats are read by now: their first int is free for the last-CTA flag.
    attn_merge_splits<HEADS, KVH, G, D, BM, SPLIT, S::kThreads, QLEN>(
        out, part_o, part_ml, counters, slot, reinterpret_cast<int*>(sm.stats), sm.merge, cta, kvh, vs_factor);
  }
}

}  // namespace onecat
