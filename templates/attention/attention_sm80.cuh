// Paged attention for prefill, decode and verify on sm_80+ (atom=m16n8k16; docs/attention.md):
// a FlashAttention-2-style body with the same rows, positions, masks, splits and ABI as the
// WMMA kernel (attention.cuh).
//
// A CTA owns BM query rows of one sequence b and one KV head (row r: token r / G, query head
// r % G: the G query heads of a KV head share every K/V load). Each warp keeps 16·MT rows (MT
// m-tiles share every K/V fragment; MT = 2 only at D = 64, where it does not spill). K/V
// stages of WN·BN keys arrive by cp.async (zero-filled past the range) into STAGES XOR-swizzled
// shared buffers, STAGES-1 stages in flight during the math. fp8 stages: with one row warp
// (BM = 16, decode) and D ≤ 128 each warp decodes its keys' codes from the raw stage straight
// into B fragments (Q·Kᵀ over a permuted d, P·V over permuted output columns: below); else a
// stage is decoded once into an fp16 tile that the warps share. WN warp columns take the
// stage's BN-key tiles side by side and merge at the end. Per tile a warp computes S = Q·Kᵀ
// with mma.sync.m16n8k16 (Q fragments in registers for 16-row warps at D ≤ 128, K by
// ldmatrix), the online softmax in fp32 on the accumulators (max over the unscaled scores,
// then one FMA and one ex2.approx.ftz per score with the softmax scale, log2 e and the K scale
// folded into one positive factor), and O += P·V with
// P converted in registers straight into A fragments (no shared round trip) and V by
// ldmatrix.trans. Tiles wholly outside a warp's causal/window range are skipped, tiles wholly
// inside it (padding rows aside) skip the mask. Splits write fp32 (max, sum, O) partials and
// the last CTA of a (sequence, head, row block) merges them. Rows that see no key produce
// zeros, never NaN.
#pragma once
#include "attention/cta.cuh"
#include "attention/kv_format.cuh"
#include "attention/mma16816.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"

namespace onecat {

// t[0] = op over t[0..N): as a tree (N a power of two), or in order.
template <bool TREE, int N, class Op>
__device__ __forceinline__ void attn_tree(float (&t)[N], Op op) {
  if constexpr (TREE) {
#pragma unroll
    for (int w = N / 2; w >= 1; w /= 2) {
#pragma unroll
      for (int n = 0; n < w; ++n) t[n] = op(t[n], t[n + w]);
    }
  } else {
#pragma unroll
    for (int n = 1; n < N; ++n) t[0] = op(t[0], t[n]);
  }
}

template <int HEADS, int KVH, int D, int PAGE, int KV, bool SCALE_PER_HEAD, bool CAUSAL, int WINDOW, int QLEN, int BM,
          int BN, int WN, int MT, int STAGES, int SPLIT, int SMEM_BYTES>
__global__ void __launch_bounds__(BM / (16 * MT) * WN * 32, 1)
    attention_sm80_kernel(half_t* __restrict__ out, const half_t* __restrict__ q, const void* __restrict__ k_cache,
                          const void* __restrict__ v_cache, const float* __restrict__ k_scale,
                          const float* __restrict__ v_scale, const int* __restrict__ block_table, int max_pages,
                          const int* __restrict__ seq_lens, const int* __restrict__ cu_q, float sm_scale,
                          float* __restrict__ partial, int* __restrict__ counters) {
  constexpr int G = HEADS / KVH;
  static_assert(MT == 1 || MT == 2, "a warp keeps 16 or 32 rows");
  constexpr int kWarpRows = 16 * MT;  // MT m-tiles of 16 rows share every K/V fragment
  constexpr int WM = BM / kWarpRows;
  constexpr int kThreads = WM * WN * 32;
  using Fmt = KvFormat<KV>;
  constexpr bool kF16 = KV == kKvF16;
  // fp8 with one row warp: fragments straight from the raw stage (no fp16 tile, no second
  // barrier). Not at D = 256: 128 accumulators leave too few registers (ptxas spills).
  constexpr bool kDirect = !kF16 && BM == 16 && D <= 128;
  constexpr int kKeys = WN * BN;                // keys per stage
  constexpr int kRowBytes = D * Fmt::kBytes;    // one cached K or V row
  constexpr int kCpr = kRowBytes / 16;          // 16-byte chunks per cached row
  constexpr int kStageChunks = kKeys * kCpr;    // of K (and of V) per stage
  constexpr int kStageBytes = kKeys * kRowBytes;
  constexpr int kQBytes = BM * D * 2;
  constexpr int kTileBytes = kKeys * D * 2;     // a stage decoded to fp16 (fp8 only)
  constexpr int kPipeBytes = 2 * STAGES * kStageBytes + (kF16 || kDirect ? 0 : 2 * kTileBytes);
  // After the key loop the whole buffer is free: warp-column partial O, then (m, l) per row.
  constexpr int kMergeBytes = (WN - 1) * BM * D * 4;
  constexpr int kStatBytes = WN * BM * 2 * 4;
  constexpr int kMainBytes = kQBytes + kPipeBytes;
  constexpr int kEndBytes = kMergeBytes + kStatBytes + 16;
  static_assert((kMainBytes > kEndBytes ? kMainBytes : kEndBytes) == SMEM_BYTES, "codegen's shared size");
  // D=256 keeps Q in shared memory (64 more registers would spill), and so do 32-row warps
  // (their 128 output accumulators at D=128 leave no room for Q).
  constexpr bool kQInRegs = D <= 128 && MT == 1;
  constexpr int kKSteps = D / 16;
  // Q from shared memory (D = 256, 32-row warps): fully unrolled, ptxas hoists every K fragment and spills.
  constexpr int kKUnroll = kQInRegs ? kKSteps : MT == 2 ? 1 : 2;
  constexpr int kNTiles = BN / 8;
  constexpr int kDTiles = D / 8;
  constexpr float kLog2e = 1.4426950408889634f;
  const float kNegInf = __int_as_float(0xff800000);

  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* q_s = smem;
  unsigned char* k_pipe = smem + kQBytes;  // [STAGES][kStageBytes]: fp16 swizzled, fp8 raw
  unsigned char* v_pipe = k_pipe + STAGES * kStageBytes;
  unsigned char* k16 = v_pipe + STAGES * kStageBytes;  // fp8 tile: the current stage in fp16, swizzled
  unsigned char* v16 = k16 + kTileBytes;
  float* merge = reinterpret_cast<float*>(smem);             // after the loop: [WN-1][BM][D]
  float* stat = reinterpret_cast<float*>(smem + kMergeBytes);  // after the loop: [WN][BM][2]
  int* is_last = reinterpret_cast<int*>(smem + kMergeBytes + kStatBytes);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % WM, wn = warp / WM;
  const int gid = lane / 4, tig = lane % 4;
  const int kvh = blockIdx.y;
  AttnCta cta;
  if (!attn_cta<G, BM, BN, QLEN, CAUSAL, WINDOW, SPLIT>(seq_lens, cu_q, cta)) return;  // no rows, or a split with no keys
  const int b = cta.b, split = cta.split, rb = cta.rb, tok0 = cta.tok0, q_len = cta.q_len, row0 = cta.row0;
  const int seq_len = cta.seq_len, lo = cta.lo, hi = cta.hi, tile_begin = cta.tile_begin, tile_end = cta.tile_end;
  const int pos0 = seq_len - q_len;  // position of query token 0
  const int iters = (tile_end - tile_begin + WN - 1) / WN;
  const int key_end = min(hi, lo + tile_end * BN);  // keys past it are zero-filled and never seen

  float ks_factor, vs_factor;
  attn_kv_factors<KV, SCALE_PER_HEAD>(k_scale, v_scale, kvh, ks_factor, vs_factor);
  float qk_scale = sm_scale * ks_factor * kLog2e;
  // The softmax takes its max over unscaled scores, so it needs qk_scale > 0: a negative scale
  // negates Q instead (exact in fp16) and zero becomes one too small to matter (all p = 1).
  const bool negate_q = qk_scale <= 0.f;
  if (negate_q) qk_scale = qk_scale < 0.f ? -qk_scale : 1e-30f;

  // Q tile (rows past the sequence's queries are zero), swizzled like K and V.
  attn_load_q<HEADS, G, D, BM, kThreads>(
      q, cta, kvh, tid, [&](int r, int part) { return reinterpret_cast<Chunk<16>*>(q_s + attn_swizzle<D>(r, part)); },
      negate_q);

  // Stage `it` (tiles tile_begin + it·WN ..) → buffer it % STAGES. Thread tid copies chunk
  // tid % kCpr of keys tid / kCpr + kKeyStep·i: its column, shared offsets and (when kKeyStep
  // keeps every swizzle's key bits) shared destinations are fixed outside the key loop, and per
  // chunk it pays one unsigned division by PAGE, one page-table read and two cp.async.
  static_assert(kThreads % kCpr == 0, "a thread's chunks share a column");
  constexpr int kKeyStep = kThreads / kCpr;
  constexpr int kSmemRow = kF16 ? D * 2 : D;  // bytes per key row of a shared stage (fp8 tile: c·16 = key·D + part·16)
  constexpr bool kFixedSwizzle = kKeyStep % 8 == 0;  // every swizzle reads key bits 0..2 only
  constexpr int kPageBytes = KVH * PAGE * kRowBytes;  // one page of every KV head
  const int* table = block_table + (long long)b * max_pages;
  const unsigned t_key = unsigned(tid) / kCpr, t_part = unsigned(tid) % kCpr;
  auto stage_at_k = [&](unsigned key) -> unsigned {
    if constexpr (kDirect) return attn_fp8_k_at<D>(key, t_part);
    else if constexpr (kF16) return attn_swizzle<D>(key, t_part);
    else return key * kSmemRow + t_part * 16;
  };
  auto stage_at_v = [&](unsigned key) -> unsigned {
    if constexpr (kDirect) return attn_fp8_v_at<D>(key, t_part);
    else return stage_at_k(key);
  };
  auto issue_stage = [&](int it) {
    // Per-thread terms are recomputed per stage, not kept live across the key loop (D = 64
    // kernels run at 96 to 128 registers and spill when they are).
    const unsigned t_col = (unsigned(kvh) * PAGE) * kRowBytes + t_part * 16;  // within a page
    const char* kc = static_cast<const char*>(k_cache) + t_col;
    const char* vc = static_cast<const char*>(v_cache) + t_col;
    const unsigned at_k0 = stage_at_k(t_key), at_v0 = stage_at_v(t_key);
    const unsigned stage = unsigned(it) % STAGES;
    const unsigned kdst = sm80::smem_address(k_pipe) + stage * kStageBytes, vdst = sm80::smem_address(v_pipe) + stage * kStageBytes;
    const unsigned j0 = unsigned(lo + (tile_begin + it * WN) * BN) + t_key;
#pragma unroll
    for (int i = 0; i < (kStageChunks + kThreads - 1) / kThreads; ++i) {
      if (kStageChunks % kThreads != 0 && tid + i * kThreads >= kStageChunks) break;
      const unsigned key = t_key + kKeyStep * i, j = j0 + kKeyStep * i;
      const bool ok = j < unsigned(key_end);
      const unsigned page = j / PAGE;
      const unsigned in_page = (j - page * PAGE) * kRowBytes;
      // Past the range: the sequence's first page (any valid address; nothing is read), no branch.
      const unsigned entry = unsigned(__ldg(table + (ok ? page : 0u)));
      const size_t off = size_t(entry) * kPageBytes + in_page;
      const unsigned at_k = kFixedSwizzle ? at_k0 + i * (kKeyStep * kSmemRow) : stage_at_k(key);
      const unsigned at_v = kFixedSwizzle ? at_v0 + i * (kKeyStep * kSmemRow) : stage_at_v(key);
      sm80::cp_async16(kdst + at_k, kc + off, ok ? 16 : 0);
      sm80::cp_async16(vdst + at_v, vc + off, ok ? 16 : 0);
    }
  };
  // fp8: the landed stage's codes → fp16 (exact; the 2^8 of E4M3 is in the factors).
  auto decode_stage = [&](int it) {
    const int stage = it % STAGES;
#pragma unroll
    for (int i = 0; i < (kStageChunks + kThreads - 1) / kThreads; ++i) {
      const int c = tid + i * kThreads;
      if (kStageChunks % kThreads != 0 && c >= kStageChunks) break;
      const int key = c / kCpr, part = c % kCpr;  // 16 codes: fp16 chunks 2·part, 2·part + 1
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint4 raw = *reinterpret_cast<const uint4*>((kv ? v_pipe : k_pipe) + stage * kStageBytes + c * 16);
        uint4 h0, h1;
        attn_fp8x4_to_half2x2<KV>(raw.x, h0.x, h0.y);
        attn_fp8x4_to_half2x2<KV>(raw.y, h0.z, h0.w);
        attn_fp8x4_to_half2x2<KV>(raw.z, h1.x, h1.y);
        attn_fp8x4_to_half2x2<KV>(raw.w, h1.z, h1.w);
        unsigned char* dst = kv ? v16 : k16;
        *reinterpret_cast<uint4*>(dst + attn_swizzle<D>(key, 2 * part)) = h0;
        *reinterpret_cast<uint4*>(dst + attn_swizzle<D>(key, 2 * part + 1)) = h1;
      }
    }
  };

  // This thread's rows (gid, gid + 8 of each of the warp's m-tiles) and the keys each sees: [lo_r, hi_r).
  int hi_r[MT][2], lo_r[MT][2];
  int w_hi_min = 0x7fffffff, w_hi_max = -0x7fffffff, w_lo_min = 0x7fffffff, w_lo_max = -0x7fffffff;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int t = (row0 + wm * kWarpRows + 16 * mt + gid + 8 * r) / G;
      const int pos = pos0 + t;
      hi_r[mt][r] = t < q_len ? (CAUSAL ? pos + 1 : seq_len) : 0;
      lo_r[mt][r] = WINDOW > 0 ? pos - WINDOW + 1 : 0;
      // Padding rows (no query: decode pads G query heads to 16 rows) are never stored, so
      // they do not hold the warp to masking every tile; unmasked, they see finite scores.
      if (t < q_len) {
        w_hi_min = min(w_hi_min, hi_r[mt][r]), w_hi_max = max(w_hi_max, hi_r[mt][r]);
        w_lo_min = min(w_lo_min, lo_r[mt][r]), w_lo_max = max(w_lo_max, lo_r[mt][r]);
      }
    }
  }
  // Warp-wide bounds: a tile past every row's range is skipped, one inside every row's range
  // needs no mask.
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) {
    w_hi_min = min(w_hi_min, __shfl_xor_sync(0xffffffffu, w_hi_min, o));
    w_hi_max = max(w_hi_max, __shfl_xor_sync(0xffffffffu, w_hi_max, o));
    w_lo_min = min(w_lo_min, __shfl_xor_sync(0xffffffffu, w_lo_min, o));
    w_lo_max = max(w_lo_max, __shfl_xor_sync(0xffffffffu, w_lo_max, o));
  }

  float o_acc[MT][kDTiles][4];
  float m_run[MT][2], l_run[MT][2];  // l: this thread's columns only
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mt][n][e] = 0.f;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) m_run[mt][r] = kNegInf, l_run[mt][r] = 0.f;
  }

  __syncthreads();  // Q is in shared memory
  // ldmatrix lane roles. A (Q, m-tile 0): matrix i = lane / 8 holds rows (i % 2)·8.., k chunk i / 2.
  const int a_row = wm * kWarpRows + (lane / 8 % 2) * 8 + lane % 8, a_chunk = lane / 16;
  // B of Q·Kᵀ (K rows): matrix i holds keys (i / 2)·8.., d chunk i % 2.
  const int bk_key = (lane / 16) * 8 + lane % 8, bk_chunk = lane / 8 % 2;
  // B of P·V (V rows, transposed): matrix i holds keys (i % 2)·8.., d chunk i / 2.
  const int bv_key = (lane / 8 % 2) * 8 + lane % 8, bv_chunk = lane / 16;
  const unsigned q_base = sm80::smem_address(q_s);
  // Direct fp8: k-step kk of Q·Kᵀ sums d = 64·(kk / 4) + 16·tig + 4·(kk % 4) + 0..3 in the
  // k slots 2·tig, +1, +8, +9 of a fragment, so a thread's K bytes of four k-steps are one
  // 16-byte load (the sum is the same in any order of d); Q's fragments follow that order.
  auto q_frag_direct = [&](int kk, unsigned (&a)[4]) {
    const int d = 64 * (kk / 4) + 16 * tig + 4 * (kk % 4);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = gid + 8 * (e % 2), dd = d + 2 * (e / 2);
      a[e] = *reinterpret_cast<const unsigned*>(q_s + attn_swizzle<D>(r, dd / 8) + (dd % 8) * 2);
    }
  };
  unsigned q_frag[kQInRegs ? kKSteps : 1][4];
  if constexpr (kQInRegs) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      if constexpr (kDirect) {
        q_frag_direct(kk, q_frag[kk]);
      } else {
        sm80::ldmatrix_x4(q_frag[kk], q_base + attn_swizzle<D>(a_row, 2 * kk + a_chunk));
      }
    }
  }

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < iters) issue_stage(s);
    sm80::cp_async_commit();
  }
  const bool warp_has_rows = (row0 + wm * kWarpRows) / G < q_len;  // else all the warp's rows are padding
  for (int it = 0; it < iters; ++it) {
    sm80::cp_async_wait<STAGES - 2>();
    __syncthreads();  // stage `it` landed for every thread; every warp is done with it - 1
    if (it + STAGES - 1 < iters) issue_stage(it + STAGES - 1);
    sm80::cp_async_commit();
    unsigned k_base, v_base;
    if constexpr (kF16 || kDirect) {
      k_base = sm80::smem_address(k_pipe + (it % STAGES) * kStageBytes);
      v_base = sm80::smem_address(v_pipe + (it % STAGES) * kStageBytes);
    } else {
      decode_stage(it);
      __syncthreads();
      k_base = sm80::smem_address(k16);
      v_base = sm80::smem_address(v16);
    }
    const int tile = tile_begin + it * WN + wn;
    const int key0 = lo + tile * BN;
    // Warp-uniform: no divergence around mma.sync.
    if (!warp_has_rows || tile >= tile_end || key0 >= w_hi_max || key0 + BN <= w_lo_min) continue;
    const int key_row0 = wn * BN;  // the warp's keys in the stage

    float s[MT][kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
      }
    }
    if constexpr (kDirect) {
      const unsigned char* ks = k_pipe + (it % STAGES) * kStageBytes;
#pragma unroll
      for (int h = 0; h < D / 64; ++h) {
        uint4 raw[kNTiles];
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) raw[n] = *reinterpret_cast<const uint4*>(ks + attn_fp8_k_at<D>(key_row0 + 8 * n + gid, 4 * h + tig));
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          unsigned a[4];  // kDirect: D <= 128, so Q's fragments are in registers
#pragma unroll
          for (int e = 0; e < 4; ++e) a[e] = q_frag[4 * h + i][e];
#pragma unroll
          for (int n = 0; n < kNTiles; ++n) {
            const unsigned w = i == 0 ? raw[n].x : i == 1 ? raw[n].y : i == 2 ? raw[n].z : raw[n].w;
            unsigned b0, b1;
            attn_fp8x4_to_half2x2<KV>(w, b0, b1);
            sm80::mma_16816(s[0][n], a, b0, b1);
          }
        }
      }
    } else {
#pragma unroll kKUnroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      unsigned a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[kk][e];
        } else {
          sm80::ldmatrix_x4(a[mt], q_base + attn_swizzle<D>(a_row + 16 * mt, 2 * kk + a_chunk));
        }
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        unsigned bk[4];
        sm80::ldmatrix_x4(bk, k_base + attn_swizzle<D>(key_row0 + 16 * np + bk_key, 2 * kk + bk_chunk));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          sm80::mma_16816(s[mt][2 * np], a[mt], bk[0], bk[1]);
          sm80::mma_16816(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }
    }

    // Online softmax in the log2 domain; element e of a tile is row e / 2, key 2·tig + e % 2.
    // The max is taken over the unscaled scores (qk_scale > 0: a negative or zero factor was
    // folded into Q above) and each p = 2^(s·qk_scale − max) is one FMA and one EX2.
    const bool need_mask = key0 + BN > w_hi_min || (WINDOW > 0 && key0 < w_lo_max);
    float alpha[MT][2];
    bool moved = false;  // some row's max rose: O needs rescaling
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (need_mask) {
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = key0 + n * 8 + 2 * tig + e % 2;
            if (!(j < hi_r[mt][e / 2] && j >= lo_r[mt][e / 2])) s[mt][n][e] = kNegInf;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // Max and sum as trees for 16-row warps (a chain of dependent fmaxf / adds stalls the
        // warp on each); 32-row warps interleave four rows' chains and keep the registers.
        float t[kNTiles];
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) t[n] = fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]);
        attn_tree<MT == 1, kNTiles>(t, [](float a, float b) { return fmaxf(a, b); });
        float mx = t[0];
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run[mt][r], mx * qk_scale);
        const float base = m_new == kNegInf ? 0.f : m_new;  // a row with nothing seen yet stays at 0
        alpha[mt][r] = m_run[mt][r] == kNegInf ? 0.f : attn_exp2(m_run[mt][r] - base);
        moved |= m_new != m_run[mt][r];
        m_run[mt][r] = m_new;
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) {
          s[mt][n][2 * r] = attn_exp2(fmaf(s[mt][n][2 * r], qk_scale, -base));
          s[mt][n][2 * r + 1] = attn_exp2(fmaf(s[mt][n][2 * r + 1], qk_scale, -base));
          t[n] = s[mt][n][2 * r] + s[mt][n][2 * r + 1];
        }
        attn_tree<MT == 1, kNTiles>(t, [](float a, float b) { return a + b; });
        l_run[mt][r] = l_run[mt][r] * alpha[mt][r] + t[0];
      }
    }
    // Once the maxima settle (most tiles of a long context) no row moves and the warp skips
    // the D/2 multiplies per row; an unmoved row has alpha = 1 or holds no weight yet (O = 0).
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int n = 0; n < kDTiles; ++n) {
        o_acc[mt][n][0] *= alpha[mt][0];
        o_acc[mt][n][1] *= alpha[mt][0];
        o_acc[mt][n][2] *= alpha[mt][1];
        o_acc[mt][n][3] *= alpha[mt][1];
      }
    }
    }

    // O += P·V: the score accumulators of key tiles 2j, 2j+1 are the A fragment of k-step j,
    // all packed to fp16 before the first P·V mma (packed per k-step, ptxas capped a D=64
    // window kernel at 128 registers and spilled 28 bytes).
    unsigned pk[BN / 16][MT][4];
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pk[j][mt][0] = attn_pack_half2(s[mt][2 * j][0], s[mt][2 * j][1]);
        pk[j][mt][1] = attn_pack_half2(s[mt][2 * j][2], s[mt][2 * j][3]);
        pk[j][mt][2] = attn_pack_half2(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
        pk[j][mt][3] = attn_pack_half2(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
      }
    }
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      const unsigned (&p)[MT][4] = pk[j];
      if constexpr (kDirect) {  // MT = 1 (one 16-row warp)
        // Output column n of d-tile dt is d = n·D/8 + dt: a thread (n = gid) needs D/8
        // contiguous bytes of each of its four key rows 2·tig, +1, +8, +9, and byte dt of two
        // rows makes one fp16x2 of the B fragment. Read 16 bytes of the rows at a time (D = 64: 8).
        const unsigned char* vs = v_pipe + (it % STAGES) * kStageBytes;
        constexpr int kPart = D == 64 ? 2 : 4;  // words per row and read (one read: D <= 128)
#pragma unroll
        for (int c = 0; c < D / 32 / kPart; ++c) {
          unsigned v[4][kPart];
#pragma unroll
          for (int rr = 0; rr < 4; ++rr) {
            const int key = key_row0 + 16 * j + 2 * tig + (rr % 2) + 8 * (rr / 2);
            if constexpr (D == 64) {
              const uint2 x = *reinterpret_cast<const uint2*>(vs + key * D + 8 * gid);
              v[rr][0] = x.x, v[rr][1] = x.y;
            } else {
              const uint4 x = *reinterpret_cast<const uint4*>(vs + attn_fp8_v_at<D>(key, gid * (D / 128) + c));
              v[rr][0] = x.x, v[rr][1] = x.y, v[rr][2] = x.z, v[rr][3] = x.w;
            }
          }
#pragma unroll
          for (int wi = 0; wi < kPart; ++wi) {
            const int dt = 4 * (c * kPart + wi);  // d-tiles dt..dt+3: bytes dt..dt+3 of the D/8 read
            sm80::mma_16816(o_acc[0][dt + 0], p[0], attn_fp8_pair_to_half2<KV, 0>(v[0][wi], v[1][wi]), attn_fp8_pair_to_half2<KV, 0>(v[2][wi], v[3][wi]));
            sm80::mma_16816(o_acc[0][dt + 1], p[0], attn_fp8_pair_to_half2<KV, 1>(v[0][wi], v[1][wi]), attn_fp8_pair_to_half2<KV, 1>(v[2][wi], v[3][wi]));
            sm80::mma_16816(o_acc[0][dt + 2], p[0], attn_fp8_pair_to_half2<KV, 2>(v[0][wi], v[1][wi]), attn_fp8_pair_to_half2<KV, 2>(v[2][wi], v[3][wi]));
            sm80::mma_16816(o_acc[0][dt + 3], p[0], attn_fp8_pair_to_half2<KV, 3>(v[0][wi], v[1][wi]), attn_fp8_pair_to_half2<KV, 3>(v[2][wi], v[3][wi]));
          }
        }
      } else {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          unsigned bv[4];
          sm80::ldmatrix_x4_trans(bv, v_base + attn_swizzle<D>(key_row0 + 16 * j + bv_key, 2 * dp + bv_chunk));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            sm80::mma_16816(o_acc[mt][2 * dp], p[mt], bv[0], bv[1]);
            sm80::mma_16816(o_acc[mt][2 * dp + 1], p[mt], bv[2], bv[3]);
          }
        }
      }
    }
  }
  sm80::cp_async_wait<0>();
  __syncthreads();  // the buffers are free for the merge

  // Row sums over the quad, then the warp columns meet: common max, rescale, sum.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[mt][r] += __shfl_xor_sync(0xffffffffu, l_run[mt][r], 1);
      l_run[mt][r] += __shfl_xor_sync(0xffffffffu, l_run[mt][r], 2);
    }
  }
  int lrow[MT][2];  // rows within the CTA
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    lrow[mt][0] = wm * kWarpRows + 16 * mt + gid;
    lrow[mt][1] = lrow[mt][0] + 8;
  }
  if (tig == 0) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        stat[(wn * BM + lrow[mt][r]) * 2] = m_run[mt][r];
        stat[(wn * BM + lrow[mt][r]) * 2 + 1] = l_run[mt][r];
      }
    }
  }
  __syncthreads();
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = kNegInf;
      row_sum[mt][r] = 0.f;
#pragma unroll
      for (int w = 0; w < WN; ++w) row_max[mt][r] = fmaxf(row_max[mt][r], stat[(w * BM + lrow[mt][r]) * 2]);
#pragma unroll
      for (int w = 0; w < WN; ++w) {
        const float mw = stat[(w * BM + lrow[mt][r]) * 2];
        row_sum[mt][r] += mw == kNegInf ? 0.f : stat[(w * BM + lrow[mt][r]) * 2 + 1] * exp2f(mw - row_max[mt][r]);
      }
    }
  }
  if constexpr (WN > 1) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float f[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) f[r] = m_run[mt][r] == kNegInf ? 0.f : exp2f(m_run[mt][r] - row_max[mt][r]);
#pragma unroll
      for (int n = 0; n < kDTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o_acc[mt][n][e] *= f[e / 2];
      }
      if (wn > 0) {
#pragma unroll
        for (int n = 0; n < kDTiles; ++n) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            *reinterpret_cast<float2*>(merge + ((wn - 1) * BM + lrow[mt][r]) * D + n * 8 + 2 * tig) =
                make_float2(o_acc[mt][n][2 * r], o_acc[mt][n][2 * r + 1]);
          }
        }
      }
    }
    __syncthreads();
    if (wn == 0) {
#pragma unroll 1
      for (int w = 1; w < WN; ++w) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
          for (int n = 0; n < kDTiles; ++n) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const float2 v = *reinterpret_cast<const float2*>(merge + ((w - 1) * BM + lrow[mt][r]) * D + n * 8 + 2 * tig);
              o_acc[mt][n][2 * r] += v.x;
              o_acc[mt][n][2 * r + 1] += v.y;
            }
          }
        }
      }
    }
  }

  if (SPLIT == 1 || cta.n_splits == 1) {  // a short context's single split writes out directly
    if (wn != 0) return;
    // out = O / l · v-scale, two halves per store (a quad writes 16 contiguous bytes of a row).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int t = (row0 + lrow[mt][r]) / G, h = (row0 + lrow[mt][r]) % G;
        if (t >= q_len) continue;
        const float inv = row_sum[mt][r] > 0.f ? vs_factor / row_sum[mt][r] : 0.f;
        half_t* dst = out + ((long long)(tok0 + t) * HEADS + kvh * G + h) * D;
#pragma unroll
        for (int n = 0; n < kDTiles; ++n) {
          if constexpr (kDirect) {  // columns 2·tig, +1 of d-tile n are d = (2·tig + e)·D/8 + n
            dst[2 * tig * (D / 8) + n] = float_to_half(o_acc[mt][n][2 * r] * inv);
            dst[(2 * tig + 1) * (D / 8) + n] = float_to_half(o_acc[mt][n][2 * r + 1] * inv);
          } else {
            Chunk<4> v;
            v.h[0] = float_to_half(o_acc[mt][n][2 * r] * inv).bits;
            v.h[1] = float_to_half(o_acc[mt][n][2 * r + 1] * inv).bits;
            gmem_store<4>(dst + 2 * tig + n * 8, v);
          }
        }
      }
    }
  } else if constexpr (SPLIT > 1) {
    // Partials of (b, kvh, rb): [SPLIT][BM][D] O and [SPLIT][BM][2] (max, sum), then the
    // last CTA of the slot merges (rows past the queries are neither written nor read).
    float *part_o, *part_ml;
    const long long slot = attn_split_slot<KVH, G, D, BM, QLEN, SPLIT>(partial, cta, kvh, part_o, part_ml);
    if (wn == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if ((row0 + lrow[mt][r]) / G >= q_len) continue;
          float* dst = part_o + (split * BM + lrow[mt][r]) * D;
#pragma unroll
          for (int n = 0; n < kDTiles; ++n) {
            if constexpr (kDirect) {
              __stcg(dst + 2 * tig * (D / 8) + n, o_acc[mt][n][2 * r]);
              __stcg(dst + (2 * tig + 1) * (D / 8) + n, o_acc[mt][n][2 * r + 1]);
            } else {
              __stcg(reinterpret_cast<float2*>(dst + 2 * tig + n * 8), make_float2(o_acc[mt][n][2 * r], o_acc[mt][n][2 * r + 1]));
            }
          }
          if (tig == 0) {
            __stcg(reinterpret_cast<float2*>(part_ml + (split * BM + lrow[mt][r]) * 2), make_float2(row_max[mt][r], row_sum[mt][r]));
          }
        }
      }
    }
    attn_merge_splits<HEADS, KVH, G, D, BM, SPLIT, kThreads>(out, part_o, part_ml, counters, slot, is_last, merge, cta, kvh,
                                                               vs_factor);
  }
}

}  // namespace onecat
