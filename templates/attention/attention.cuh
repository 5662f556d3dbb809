// Paged attention for prefill, decode and verify: one kernel body (docs/attention.md).
//
// A CTA owns BM query rows of one sequence b and one KV head: row r is (token r / G, query
// head r % G), so the G query heads of a KV head share every K/V load (GQA packing). Its key
// range [lo, hi) follows from the rows' positions (causal, sliding window); SPLIT CTAs share
// it in tiles of BN keys and WN warp columns take turns within a CTA. Each warp keeps 16 rows:
//   S = Q·Kᵀ (WMMA, fp32) → shared → online softmax in fp32 by the lanes → P (fp16) → O += P·V
// with O in accumulator fragments, rescaled per row through the atom's row map (wmma::acc_rows). K/V tiles
// go global → registers → shared, the next tile's loads in flight during this tile's math
// (register double buffering: Volta has no cp.async); fp8 codes become fp16 on the way and
// their scales join the softmax scale (K) and the final normalisation (V). Warp columns merge
// in shared memory; splits write fp32 (max, sum, O) partials and the last CTA to finish a
// (sequence, head, row block) merges them and writes the output.
//
// Positions: a sequence holds seq_lens[b] keys (its new tokens included: kv_write ran
// first); its q_len query tokens are the last q_len positions. Rows that see no key (padding
// rows, or seq_lens[b] = 0) produce zeros, never NaN.
#pragma once
#include "attention/cta.cuh"
#include "attention/kv_format.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/wmma_atom.cuh"

namespace onecat {

template <int HEADS, int KVH, int D, int PAGE, int KV, bool SCALE_PER_HEAD, bool CAUSAL, int WINDOW, int QLEN, int BM,
          int BN, int WN, int SPLIT, int SMEM_BYTES>
__global__ void __launch_bounds__(BM / 16 * WN * 32)
    attention_kernel(half_t* __restrict__ out, const half_t* __restrict__ q, const void* __restrict__ k_cache,
                     const void* __restrict__ v_cache, const float* __restrict__ k_scale,
                     const float* __restrict__ v_scale, const int* __restrict__ block_table, int max_pages,
                     const int* __restrict__ seq_lens, const int* __restrict__ cu_q, float sm_scale,
                     float* __restrict__ partial, int* __restrict__ counters) {
  constexpr int G = HEADS / KVH;
  constexpr int WM = BM / 16;
  constexpr int kWarps = WM * WN;
  constexpr int kThreads = kWarps * 32;
  constexpr int kLd = D + 8;      // halves per shared row of Q, K and V (rows spread over banks)
  constexpr int kSld = BN + 4;    // floats per shared row of S
  constexpr int kPld = BN + 8;    // halves per shared row of P (written over the warp's S)
  constexpr int kFd = D / 16;     // output fragments per warp
  constexpr int kFn = BN / 16;    // score fragments per warp
  using Fmt = KvFormat<KV>;
  constexpr int kCpr = D * Fmt::kBytes / 16;  // 16-byte chunks per cached row
  constexpr int kTileChunks = WN * BN * kCpr;
  constexpr int kChunksPerThread = (kTileChunks + kThreads - 1) / kThreads;
  constexpr int kTileBytes = BM * kLd * 2 + 2 * WN * BN * kLd * 2;
  constexpr int kMergeBytes = WN > 1 ? BM * D * 4 : 0;
  constexpr int kRegionBytes = kTileBytes > kMergeBytes ? kTileBytes : kMergeBytes;
  static_assert(kRegionBytes + kWarps * 16 * kSld * 4 + kWarps * 16 * 3 * 4 == SMEM_BYTES, "codegen's shared size");
  static_assert(kPld * 2 <= kSld * 4, "P fits over S");
  constexpr float kLog2e = 1.4426950408889634f;
  const float kNegInf = __int_as_float(0xff800000);

  extern __shared__ __align__(128) unsigned char smem[];
  half_t* qs = reinterpret_cast<half_t*>(smem);
  half_t* ks = qs + BM * kLd;
  half_t* vs = ks + WN * BN * kLd;
  float* merge = reinterpret_cast<float*>(smem);  // after the key loop: [BM][D]
  float* ss_all = reinterpret_cast<float*>(smem + kRegionBytes);
  float* stats = ss_all + kWarps * 16 * kSld;  // per warp: alpha[16], m[16], l[16]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % WM, wn = warp / WM;
  const int kvh = blockIdx.y;
  AttnCta cta;
  if (!attn_cta<G, BM, BN, QLEN, CAUSAL, WINDOW, SPLIT>(seq_lens, cu_q, cta)) return;  // no rows, or a split with no keys
  const int b = cta.b, split = cta.split, rb = cta.rb, tok0 = cta.tok0, q_len = cta.q_len, row0 = cta.row0;
  const int seq_len = cta.seq_len, lo = cta.lo, hi = cta.hi, tile_begin = cta.tile_begin, tile_end = cta.tile_end;
  const int pos0 = seq_len - q_len;  // position of query token 0
  const int iters = (tile_end - tile_begin + WN - 1) / WN;

  float ks_factor, vs_factor;
  attn_kv_factors<KV, SCALE_PER_HEAD>(k_scale, v_scale, kvh, ks_factor, vs_factor);
  const float qk_scale = sm_scale * ks_factor * kLog2e;

  // Q tile: rows past the sequence's queries are zero.
  attn_load_q<HEADS, G, D, BM, kThreads>(
      q, cta, kvh, tid, [&](int r, int part) { return reinterpret_cast<Chunk<16>*>(qs + r * kLd + part * 8); });

  // K/V tiles: chunk c of the CTA's WN tiles → (warp column, key, 16-byte part).
  const int* table = block_table + (long long)b * max_pages;
  Chunk<16> kr[kChunksPerThread], vr[kChunksPerThread];
  auto load_tiles = [&](int it) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = tid + i * kThreads;
      const int g = c / (BN * kCpr), key = (c / kCpr) % BN, part = c % kCpr;
      const int tile = tile_begin + it * WN + g;
      const int j = lo + tile * BN + key;
      kr[i] = Chunk<16>{};
      vr[i] = Chunk<16>{};
      if (c < kTileChunks && tile < tile_end && j < hi) {
        const long long row = ((long long)table[j / PAGE] * KVH + kvh) * PAGE + j % PAGE;
        const long long off = row * (D * Fmt::kBytes) + part * 16;
        kr[i] = gmem_load_nc<16>(static_cast<const char*>(k_cache) + off);
        vr[i] = gmem_load_nc<16>(static_cast<const char*>(v_cache) + off);
      }
    }
  };
  auto store_tiles = [&] {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int c = tid + i * kThreads;
      if (c >= kTileChunks) continue;
      const int g = c / (BN * kCpr), key = (c / kCpr) % BN, part = c % kCpr;
      const int at = (g * BN + key) * kLd + part * 16 / Fmt::kBytes;
      if constexpr (KV == kKvF16) {
        *reinterpret_cast<Chunk<16>*>(ks + at) = kr[i];
        *reinterpret_cast<Chunk<16>*>(vs + at) = vr[i];
      } else {
        // 16 codes → two chunks of 8 halves, four codes (one word) per conversion.
        Chunk<16> klo, khi, vlo, vhi;
        const unsigned* kw = reinterpret_cast<const unsigned*>(kr[i].h);
        const unsigned* vw = reinterpret_cast<const unsigned*>(vr[i].h);
        unsigned* klo_w = reinterpret_cast<unsigned*>(klo.h);
        unsigned* khi_w = reinterpret_cast<unsigned*>(khi.h);
        unsigned* vlo_w = reinterpret_cast<unsigned*>(vlo.h);
        unsigned* vhi_w = reinterpret_cast<unsigned*>(vhi.h);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          attn_fp8x4_to_half2x2<KV>(kw[j], klo_w[2 * j], klo_w[2 * j + 1]);
          attn_fp8x4_to_half2x2<KV>(kw[2 + j], khi_w[2 * j], khi_w[2 * j + 1]);
          attn_fp8x4_to_half2x2<KV>(vw[j], vlo_w[2 * j], vlo_w[2 * j + 1]);
          attn_fp8x4_to_half2x2<KV>(vw[2 + j], vhi_w[2 * j], vhi_w[2 * j + 1]);
        }
        *reinterpret_cast<Chunk<16>*>(ks + at) = klo;
        *reinterpret_cast<Chunk<16>*>(ks + at + 8) = khi;
        *reinterpret_cast<Chunk<16>*>(vs + at) = vlo;
        *reinterpret_cast<Chunk<16>*>(vs + at + 8) = vhi;
      }
    }
  };

  float* ss = ss_all + warp * 16 * kSld;
  half_t* ps = reinterpret_cast<half_t*>(ss);
  float* alpha_s = stats + warp * 48;
  int acc_row[8];
  wmma::acc_rows(acc_row, ss, kSld);

  // The softmax lanes: lane pair (2r, 2r+1) owns row r of the warp, columns in pairs.
  const int my_r = lane / 2, my_half = lane % 2;
  const int my_t = (row0 + wm * 16 + my_r) / G;
  const int my_pos = pos0 + my_t;
  int my_hi = my_t < q_len ? (CAUSAL ? my_pos + 1 : seq_len) : 0;
  const int my_lo = WINDOW > 0 ? my_pos - WINDOW + 1 : 0;
  float m_run = kNegInf, l_run = 0.f;

  wmma::Acc o[kFd];
#pragma unroll
  for (int j = 0; j < kFd; ++j) wmma::zero(o[j]);

  if (iters > 0) {
    load_tiles(0);
    store_tiles();
  }
  __syncthreads();
  for (int it = 0; it < iters; ++it) {
    if (it + 1 < iters) load_tiles(it + 1);
    const int tile = tile_begin + it * WN + wn;
    // Warp-uniform; a warp whose 16 rows are all padding only helps load.
    if (tile < tile_end && (row0 + wm * 16) / G < q_len) {
      const half_t* kt = ks + wn * BN * kLd;
      const half_t* vt = vs + wn * BN * kLd;
      wmma::Acc s[kFn];
#pragma unroll
      for (int j = 0; j < kFn; ++j) wmma::zero(s[j]);
#pragma unroll 1  // unrolled, ptxas hoists every K fragment and spills at D=128
      for (int kk = 0; kk < kFd; ++kk) {
        wmma::Frag a;
        wmma::load_a(a, qs + wm * 16 * kLd + kk * 16, kLd);
#pragma unroll
        for (int j = 0; j < kFn; ++j) {
          wmma::Frag bf;
          wmma::load_b<wmma::Layout::kCol>(bf, kt + j * 16 * kLd + kk * 16, kLd);
          wmma::mma<wmma::Layout::kCol>(s[j], a, bf);
        }
      }
#pragma unroll
      for (int j = 0; j < kFn; ++j) wmma::store_acc(ss + j * 16, kSld, s[j]);
      __syncwarp();

      // Online softmax of this tile's scores, in the log2 domain.
      const int key0 = lo + tile * BN;
      float p[BN / 2];
      float tmax = kNegInf;
#pragma unroll
      for (int k = 0; k < BN / 4; ++k) {
        const int c = 4 * k + 2 * my_half;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int j = key0 + c + u;
          const bool visible = j < my_hi && j >= my_lo;
          const float v = visible ? ss[my_r * kSld + c + u] * qk_scale : kNegInf;
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
      for (int k = 0; k < BN / 2; ++k) {
        p[k] = exp2f(p[k] - base);
        sum += p[k];
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      __syncwarp();  // every lane has read S before P overwrites it
#pragma unroll
      for (int k = 0; k < BN / 4; ++k) {
        const int c = 4 * k + 2 * my_half;
        const half_t lo16 = float_to_half(p[2 * k]), hi16 = float_to_half(p[2 * k + 1]);
        *reinterpret_cast<unsigned*>(ps + my_r * kPld + c) = unsigned(lo16.bits) | (unsigned(hi16.bits) << 16);
      }
      if (my_half == 0) alpha_s[my_r] = alpha;
      __syncwarp();
      float row_alpha[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) row_alpha[e] = alpha_s[acc_row[e]];
#pragma unroll
      for (int j = 0; j < kFd; ++j) {
#pragma unroll
        for (int e = 0; e < 8; ++e) o[j].v[e] *= row_alpha[e];
      }
#pragma unroll
      for (int kk = 0; kk < kFn; ++kk) {
        wmma::Frag a;
        wmma::load_a(a, ps + kk * 16, kPld);
#pragma unroll
        for (int j = 0; j < kFd; ++j) {
          wmma::Frag bf;
          wmma::load_b<wmma::Layout::kRow>(bf, vt + kk * 16 * kLd + j * 16, kLd);
          wmma::mma<wmma::Layout::kRow>(o[j], a, bf);
        }
      }
      __syncwarp();  // P is read before the next tile's S overwrites it
    }
    __syncthreads();
    if (it + 1 < iters) {
      store_tiles();
      __syncthreads();
    }
  }

  // Warp columns merge: every warp rescales its rows to the common max, then column 0 sums.
  float* m_s = stats + warp * 48 + 16;
  float* l_s = m_s + 16;
  if (my_half == 0) {
    m_s[my_r] = m_run;
    l_s[my_r] = l_run;
  }
  __syncthreads();
  float row_max = kNegInf, row_sum = 0.f;  // lanes: row my_r, over the warp columns
#pragma unroll
  for (int w = 0; w < WN; ++w) row_max = fmaxf(row_max, stats[(w * WM + wm) * 48 + 16 + my_r]);
#pragma unroll
  for (int w = 0; w < WN; ++w) {
    const float mw = stats[(w * WM + wm) * 48 + 16 + my_r];
    row_sum += mw == kNegInf ? 0.f : stats[(w * WM + wm) * 48 + 32 + my_r] * exp2f(mw - row_max);
  }
  if constexpr (WN > 1) {
    __syncwarp();
    if (my_half == 0) alpha_s[my_r] = m_run == kNegInf ? 0.f : exp2f(m_run - row_max);
    __syncwarp();
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = alpha_s[acc_row[e]];
#pragma unroll
    for (int j = 0; j < kFd; ++j) {
#pragma unroll
      for (int e = 0; e < 8; ++e) o[j].v[e] *= f[e];
    }
#pragma unroll 1
    for (int w = 1; w < WN; ++w) {
      if (wn == w) {
#pragma unroll
        for (int j = 0; j < kFd; ++j) wmma::store_acc(merge + wm * 16 * D + j * 16, D, o[j]);
      }
      __syncthreads();
      if (wn == 0) {
#pragma unroll
        for (int j = 0; j < kFd; ++j) {
          wmma::Acc other;
          wmma::load_acc(other, merge + wm * 16 * D + j * 16, D);
#pragma unroll
          for (int e = 0; e < 8; ++e) o[j].v[e] += other.v[e];
        }
      }
      __syncthreads();
    }
  }

  if (SPLIT == 1 || cta.n_splits == 1) {  // a short context's single split writes out directly
    if (wn != 0) return;
    // out = O / l · v-scale, through the warp's scratch 16×16 at a time (16-byte stores).
    __syncwarp();
    if (my_half == 0) alpha_s[my_r] = row_sum > 0.f ? vs_factor / row_sum : 0.f;
    __syncwarp();
    const int r = lane / 2, c0 = (lane % 2) * 8;
    const int row = row0 + wm * 16 + r;
    const int t = row / G, h = row % G;
    const float inv = alpha_s[r];
#pragma unroll
    for (int j = 0; j < kFd; ++j) {
      wmma::store_acc(ss, kSld, o[j]);
      __syncwarp();
      Chunk<16> v;
#pragma unroll
      for (int e = 0; e < 8; ++e) v.h[e] = float_to_half(ss[r * kSld + c0 + e] * inv).bits;
      if (t < q_len) gmem_store<16>(out + ((long long)(tok0 + t) * HEADS + kvh * G + h) * D + j * 16 + c0, v);
      __syncwarp();
    }
  } else if constexpr (SPLIT > 1) {
    // Partials of (b, kvh, rb): [SPLIT][BM][D] O and [SPLIT][BM][2] (max, sum), then the
    // last CTA of the slot merges.
    float *part_o, *part_ml;
    const long long slot = attn_split_slot<KVH, G, D, BM, QLEN, SPLIT>(partial, cta, kvh, part_o, part_ml);
    if (wn == 0) {
#pragma unroll
      for (int j = 0; j < kFd; ++j) wmma::store_acc(part_o + (split * BM + wm * 16) * D + j * 16, D, o[j]);
      if (my_half == 0) {
        part_ml[(split * BM + wm * 16 + my_r) * 2] = row_max;
        part_ml[(split * BM + wm * 16 + my_r) * 2 + 1] = row_sum;
      }
    }
    // The stats are read by now: their first int is free for the last-CTA flag.
    attn_merge_splits<HEADS, KVH, G, D, BM, SPLIT, kThreads>(out, part_o, part_ml, counters, slot,
                                                               reinterpret_cast<int*>(stats), merge, cta, kvh, vs_factor);
  }
}

}  // namespace onecat
