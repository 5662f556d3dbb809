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
//
// The kernel (at the end of the file) is the algorithm's outline; each step is a device
// function over AttnSm80Shape, the kernel's compile-time shape: load the Q tile, issue a K/V
// stage, (fp8) decode it, S = Q·Kᵀ, mask and online softmax, O += P·V, merge the warp
// columns, store the rows or the split partials.
#pragma once
#include "attention/cta.cuh"
#include "attention/kv_format.cuh"
#include "attention/mma16816.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"

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

// The compile-time shape of one attention_sm80_kernel: its template arguments and what
// follows from them. Enumerators, not static constexpr members: NVRTC gives each of those a
// global in the module.
template <int HEADS_, int KVH_, int D_, int PAGE_, int KV_, bool SCALE_PER_HEAD_, bool CAUSAL_, int WINDOW_, int QLEN_,
          int BM_, int BN_, int WN_, int MT_, int STAGES_, int SPLIT_>
struct AttnSm80Shape {
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
    MT = MT_,
    STAGES = STAGES_,
    SPLIT = SPLIT_,
    G = HEADS / KVH,
    kWarpRows = 16 * MT,  // MT m-tiles of 16 rows share every K/V fragment
    WM = BM / kWarpRows,
    kThreads = WM * WN * 32,
    kF16 = KV == kKvF16,
    // fp8 with one row warp: fragments straight from the raw stage (no fp16 tile, no second
    // barrier). Not at D = 256: 128 accumulators leave too few registers (ptxas spills).
    kDirect = !kF16 && BM == 16 && D <= 128,
    kKeys = WN * BN,                       // keys per stage
    kRowBytes = D * KvFormat<KV>::kBytes,  // one cached K or V row
    kCpr = kRowBytes / 16,                 // 16-byte chunks per cached row
    kStageChunks = kKeys * kCpr,           // of K (and of V) per stage
    kStageBytes = kKeys * kRowBytes,
    kQBytes = BM * D * 2,
    kTileBytes = kKeys * D * 2,  // a stage decoded to fp16 (fp8 only)
    kPipeBytes = 2 * STAGES * kStageBytes + (kF16 || kDirect ? 0 : 2 * kTileBytes),
    // After the key loop the whole buffer is free: warp-column partial O, then (m, l) per row.
    kMergeBytes = (WN - 1) * BM * D * 4,
    kStatBytes = WN * BM * 2 * 4,
    kMainBytes = kQBytes + kPipeBytes,
    kEndBytes = kMergeBytes + kStatBytes + 16,
    kSmemBytes = kMainBytes > kEndBytes ? kMainBytes : kEndBytes,
    // D=256 keeps Q in shared memory (64 more registers would spill), and so do 32-row warps
    // (their 128 output accumulators at D=128 leave no room for Q).
    kQInRegs = D <= 128 && MT == 1,
    kKSteps = D / 16,
    // Q from shared memory (D = 256, 32-row warps): fully unrolled, ptxas hoists every K fragment and spills.
    kKUnroll = kQInRegs ? kKSteps : (MT == 2 ? 1 : 2),
    kNTiles = BN / 8,
    kDTiles = D / 8,
    // Decode and verify of at most 8 query rows (G ≤ 8 heads of one token, or q·G ≤ 8) in one
    // 16-row warp: a thread's second accumulator row (gid + 8) is always padding, so the softmax,
    // the rescale, the merges and the stores skip it (attn_sm80_pv: what its P holds).
    kQueryRows = QLEN * G,  // decode and verify: every row of the sequence's queries
    kHalfRows = QLEN > 0 && kQueryRows <= 8 && BM == 16 && MT == 1,
    kRowHalves = kHalfRows ? 1 : 2,  // accumulator rows r = 0 .. kRowHalves-1 of a thread hold queries
  };
  static_assert(MT == 1 || MT == 2, "a warp keeps 16 or 32 rows");
};

// The kernel's dynamic shared memory. During the key loop: the Q tile (swizzled like K and V),
// STAGES K and V stages (fp16 swizzled, or fp8 raw) and for fp8 decoded into a tile the current
// stage in fp16 (swizzled). After it, over the same bytes: the warp columns' partial O
// [WN-1][BM][D], their (max, sum) per row [WN][BM][2] and the split merge's flag.
template <class S>
struct AttnSm80Smem {
  unsigned char* q;
  unsigned char* k_pipe;  // [STAGES][kStageBytes]
  unsigned char* v_pipe;
  unsigned char* k16;
  unsigned char* v16;
  float* merge;
  float* stat;
  int* is_last;
  __device__ __forceinline__ explicit AttnSm80Smem(unsigned char* smem)
      : q(smem),
        k_pipe(smem + S::kQBytes),
        v_pipe(k_pipe + S::STAGES * S::kStageBytes),
        k16(v_pipe + S::STAGES * S::kStageBytes),
        v16(k16 + S::kTileBytes),
        merge(reinterpret_cast<float*>(smem)),
        stat(reinterpret_cast<float*>(smem + S::kMergeBytes)),
        is_last(reinterpret_cast<int*>(smem + S::kMergeBytes + S::kStatBytes)) {}
};

// A thread's place in the warp's tiles. Fragments (common/sm80.cuh): lane = 4·gid + tig.
// ldmatrix lane roles (set once Q is in shared memory, where the key loop needs them first):
// A (Q, m-tile 0): matrix i = lane / 8 holds rows (i % 2)·8.., k chunk i / 2. B of Q·Kᵀ (K
// rows): matrix i holds keys (i / 2)·8.., d chunk i % 2. B of P·V (V rows, transposed): matrix
// i holds keys (i % 2)·8.., d chunk i / 2.
struct AttnSm80Lane {
  int wm, wn;  // the warp's row warp and warp column
  int gid, tig;
  int a_row, a_chunk;
  int bk_key, bk_chunk;
  int bv_key, bv_chunk;
  template <class S>
  __device__ __forceinline__ static AttnSm80Lane of(int tid) {
    const int lane = tid % 32, warp = tid / 32;
    AttnSm80Lane l;
    l.wm = warp % S::WM, l.wn = warp / S::WM;
    l.gid = lane / 4, l.tig = lane % 4;
    return l;
  }
  template <class S>
  __device__ __forceinline__ void set_ldmatrix_roles(int tid) {
    const int lane = tid % 32;
    a_row = wm * S::kWarpRows + (lane / 8 % 2) * 8 + lane % 8, a_chunk = lane / 16;
    bk_key = (lane / 16) * 8 + lane % 8, bk_chunk = lane / 8 % 2;
    bv_key = (lane / 8 % 2) * 8 + lane % 8, bv_chunk = lane / 16;
  }
  // Row (in the CTA) of this thread's accumulator rows r = 0, 1 (gid, gid + 8) of m-tile mt,
  // for after the key loop. Not the expression attn_sm80_row_keys uses before it: the compiler
  // would share their terms and keep them live through the loop (+8 registers for prefill,
  // spills at D = 256; NVRTC 12.8).
  template <class S>
  __device__ __forceinline__ int row(int mt, int r) const {
    const int row0 = wm * S::kWarpRows + 16 * mt + gid;
    return r ? row0 + 8 : row0;
  }
};

// The keys this thread's rows see, [lo, hi) per row, and the warp-wide bounds over the rows
// that hold a query: a tile past every row's range is skipped, one inside every row's range
// needs no mask.
template <int MT>
struct AttnSm80RowKeys {
  int hi[MT][2], lo[MT][2];
  int hi_min, hi_max, lo_min, lo_max;
};

// A warp's running state for its rows: O (D/8 n-tiles per m-tile) and the online softmax's
// max and sum (the sum over this thread's columns until the key loop ends).
template <class S>
struct AttnSm80Acc {
  float o[S::MT][S::kDTiles][4];
  float m[S::MT][2], l[S::MT][2];
  // O = 0, no key seen yet.
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][n][e] = 0.f;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) m[mt][r] = __int_as_float(0xff800000), l[mt][r] = 0.f;
    }
  }
};

template <class S>
__device__ __forceinline__ AttnSm80RowKeys<S::MT> attn_sm80_row_keys(const AttnCta& cta, const AttnSm80Lane& ln) {
  const int pos0 = cta.seq_len - cta.q_len;  // position of query token 0
  AttnSm80RowKeys<S::MT> k;
  k.hi_min = 0x7fffffff, k.hi_max = -0x7fffffff, k.lo_min = 0x7fffffff, k.lo_max = -0x7fffffff;
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int t = (cta.row0 + ln.wm * S::kWarpRows + 16 * mt + ln.gid + 8 * r) / S::G;
      const int pos = pos0 + t;
      k.hi[mt][r] = t < cta.q_len ? (S::CAUSAL ? pos + 1 : cta.seq_len) : 0;
      k.lo[mt][r] = S::WINDOW > 0 ? pos - S::WINDOW + 1 : 0;
      // Padding rows (no query: decode pads G query heads to 16 rows) are never stored, so
      // they do not hold the warp to masking every tile; unmasked, they see finite scores.
      if (t < cta.q_len) {
        k.hi_min = min(k.hi_min, k.hi[mt][r]), k.hi_max = max(k.hi_max, k.hi[mt][r]);
        k.lo_min = min(k.lo_min, k.lo[mt][r]), k.lo_max = max(k.lo_max, k.lo[mt][r]);
      }
    }
  }
  if constexpr (S::QLEN == 1 && S::WINDOW == 0) {
    // Decode: a row with a query sees every key of the sequence, so the warp's bounds need no
    // reduction (a warp whose rows are all padding is skipped before they are read).
    k.hi_min = k.hi_max = cta.seq_len;
    k.lo_min = k.lo_max = 0;
    return k;
  }
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) {
    k.hi_min = min(k.hi_min, __shfl_xor_sync(0xffffffffu, k.hi_min, o));
    k.hi_max = max(k.hi_max, __shfl_xor_sync(0xffffffffu, k.hi_max, o));
    k.lo_min = min(k.lo_min, __shfl_xor_sync(0xffffffffu, k.lo_min, o));
    k.lo_max = max(k.lo_max, __shfl_xor_sync(0xffffffffu, k.lo_max, o));
  }
  return k;
}

// Byte offsets of this thread's K and V chunk of key row `key` in a shared stage: fp16 and
// decoded-fp8 stages are swizzled for ldmatrix (fp8 raw rows of D bytes, c·16 = key·D +
// part·16, are decoded into the swizzled tile), direct-fp8 stages for their 16-byte reads.
template <class S>
__device__ __forceinline__ unsigned attn_sm80_stage_at_k(unsigned key, unsigned part) {
  if constexpr (S::kDirect)
    return attn_fp8_k_at<S::D>(key, part);
  else if constexpr (S::kF16)
    return attn_swizzle<S::D>(key, part);
  else
    return key * S::D + part * 16;
}
template <class S>
__device__ __forceinline__ unsigned attn_sm80_stage_at_v(unsigned key, unsigned part) {
  if constexpr (S::kDirect)
    return attn_fp8_v_at<S::D>(key, part);
  else
    return attn_sm80_stage_at_k<S>(key, part);
}

// How a stage's copies find their pages. Thread tid copies chunk tid % kCpr of keys
// tid / kCpr + kKeyStep·i. Without a sliding window a stage starts on a page when BN is a
// multiple of PAGE, and a thread's keys t_key + kKeyStep·i (t_key < kKeyStep) then lie in the
// stage's page i / (PAGE / kKeyStep) (kRuns): one page-table read and one page address per
// page, not per copy, and every copy of a page at an immediate offset from it (where a page
// holds at least two of a thread's keys; with one, the general path is as short). The kernel
// reads the next stage's entries one iteration ahead (attn_sm80_stage_pages), so the copies
// do not wait on them.
template <class S>
struct AttnSm80Pages {
  enum : int {
    kKeyStep = S::kThreads / S::kCpr,
    kChunks = (S::kStageChunks + S::kThreads - 1) / S::kThreads,  // per thread, of K (and of V)
    kRuns = S::WINDOW == 0 && S::BN % S::PAGE == 0 && S::PAGE % kKeyStep == 0 && S::PAGE / kKeyStep >= 2,
    kPerPage = kRuns ? S::PAGE / kKeyStep : 1,  // a thread's copies per page
    kCount = kRuns ? (kChunks + kPerPage - 1) / kPerPage : 1,
  };
  unsigned entry[kCount];  // kRuns: the stage's pages' table entries
};

// The first key of stage `it` (tiles tile_begin + it·WN ..): where its pages, their prefetch and
// its copies start.
template <class S>
__device__ __forceinline__ unsigned attn_sm80_stage_key0(const AttnCta& cta, int it) {
  return unsigned(cta.lo + (cta.tile_begin + it * S::WN) * S::BN);
}

// Stage `it`'s page entries (kRuns; nothing otherwise). A page past the range reads the
// sequence's first entry (any valid address; no copy reads it).
template <class S>
__device__ __forceinline__ AttnSm80Pages<S> attn_sm80_stage_pages(const int* table, const AttnCta& cta, int key_end,
                                                                  int it) {
  using P = AttnSm80Pages<S>;
  P pages;
  if constexpr (P::kRuns) {
    const unsigned base = attn_sm80_stage_key0<S>(cta, it);  // on a page
#pragma unroll
    for (int pg = 0; pg < P::kCount; ++pg) {
      const bool any = base + unsigned(pg * S::PAGE) < unsigned(key_end);
      pages.entry[pg] = unsigned(__ldg(table + (any ? base / S::PAGE + pg : 0u)));
    }
  } else {
    pages.entry[0] = 0;
  }
  return pages;
}

// Asks L2 for stage `it`'s K and V rows of this KV head (kRuns; nothing otherwise), whole pages,
// one 128-byte line a thread at a time. Decode and verify call it before the wait for the kernel
// before them (common/grid.cuh): the older keys are not written in this pass, and the line of
// the key that kernel writes is read from L2 after the wait in any case.
template <class S>
__device__ __forceinline__ void attn_sm80_prefetch_stage(const void* k_cache, const void* v_cache, const AttnCta& cta,
                                                         int key_end, int kvh, int tid, int it,
                                                         const AttnSm80Pages<S>& pages) {
  using P = AttnSm80Pages<S>;
  if constexpr (P::kRuns) {
    constexpr int kPageBytes = S::KVH * S::PAGE * S::kRowBytes;
    constexpr int kLines = S::PAGE * S::kRowBytes / 128;  // one KV head's rows of a page
    const unsigned base = attn_sm80_stage_key0<S>(cta, it);
    const size_t head = size_t(kvh) * S::PAGE * S::kRowBytes;
#pragma unroll
    for (int pg = 0; pg < P::kCount; ++pg) {
      if (base + unsigned(pg * S::PAGE) >= unsigned(key_end)) break;
      const size_t off = size_t(pages.entry[pg]) * kPageBytes + head;
      for (int l = tid; l < kLines; l += S::kThreads) {
        grid_dependency_prefetch_l2(static_cast<const char*>(k_cache) + off + size_t(l) * 128);
        grid_dependency_prefetch_l2(static_cast<const char*>(v_cache) + off + size_t(l) * 128);
      }
    }
  }
}

// Stage `it` (tiles tile_begin + it·WN ..) → buffer it % STAGES, by cp.async, zero-filled
// past key_end. Thread tid copies chunk tid % kCpr of keys tid / kCpr + kKeyStep·i: its
// column, shared offsets and (when kKeyStep keeps every swizzle's key bits) shared
// destinations are fixed outside the key loop. Where a stage starts on a page
// (AttnSm80Pages::kRuns) it copies at immediate offsets from the page entries it is given;
// otherwise per chunk it pays one unsigned division by PAGE, one page-table read and two
// cp.async.
template <class S>
__device__ __forceinline__ void attn_sm80_issue_stage(const AttnSm80Smem<S>& sm, const void* __restrict__ k_cache,
                                                      const void* __restrict__ v_cache, const int* table,
                                                      const AttnCta& cta, int key_end, int kvh, int tid, int it,
                                                      const AttnSm80Pages<S>& pages) {
  static_assert(S::kThreads % S::kCpr == 0, "a thread's chunks share a column");
  constexpr int kKeyStep = AttnSm80Pages<S>::kKeyStep;
  constexpr int kSmemRow = S::kF16 ? S::D * 2 : S::D;          // bytes per key row of a shared stage
  constexpr bool kFixedSwizzle = kKeyStep % 8 == 0;            // every swizzle reads key bits 0..2 only
  constexpr int kPageBytes = S::KVH * S::PAGE * S::kRowBytes;  // one page of every KV head
  const unsigned t_key = unsigned(tid) / S::kCpr, t_part = unsigned(tid) % S::kCpr;
  // Per-thread terms are recomputed per stage, not kept live across the key loop (D = 64
  // kernels run at 96 to 128 registers and spill when they are).
  const unsigned t_col = (unsigned(kvh) * S::PAGE) * S::kRowBytes + t_part * 16;  // within a page
  const char* kc = static_cast<const char*>(k_cache) + t_col;
  const char* vc = static_cast<const char*>(v_cache) + t_col;
  const unsigned at_k0 = attn_sm80_stage_at_k<S>(t_key, t_part), at_v0 = attn_sm80_stage_at_v<S>(t_key, t_part);
  const unsigned stage = unsigned(it) % S::STAGES;
  const unsigned kdst = sm80::smem_address(sm.k_pipe) + stage * S::kStageBytes;
  const unsigned vdst = sm80::smem_address(sm.v_pipe) + stage * S::kStageBytes;
  const unsigned j0 = attn_sm80_stage_key0<S>(cta, it) + t_key;
  using P = AttnSm80Pages<S>;
  constexpr int kChunks = P::kChunks;
  if constexpr (P::kRuns) {
    // Shared offsets repeat every kPeriod copies (the swizzles read key bits 0..2) plus whole rows.
    constexpr int kPeriod = kKeyStep % 8 == 0 ? 1 : kKeyStep % 4 == 0 ? 2 : kKeyStep % 2 == 0 ? 4 : 8;
    unsigned at_k[kPeriod], at_v[kPeriod];
#pragma unroll
    for (int p = 0; p < kPeriod; ++p) {
      at_k[p] = kdst + attn_sm80_stage_at_k<S>(t_key + kKeyStep * p, t_part);
      at_v[p] = vdst + attn_sm80_stage_at_v<S>(t_key + kKeyStep * p, t_part);
    }
    const size_t t_row = size_t(t_key) * S::kRowBytes;  // the thread's first key row in a page
#pragma unroll
    for (int pg = 0; pg < P::kCount; ++pg) {
      const size_t page_off = size_t(pages.entry[pg]) * kPageBytes + t_row;
      const char* kp = kc + page_off;
      const char* vp = vc + page_off;
#pragma unroll
      for (int s = 0; s < P::kPerPage; ++s) {
        const int i = pg * P::kPerPage + s;
        if (i >= kChunks || (S::kStageChunks % S::kThreads != 0 && tid + i * S::kThreads >= S::kStageChunks)) break;
        const int bytes = j0 + kKeyStep * i < unsigned(key_end) ? 16 : 0;
        constexpr int kRow = kKeyStep * S::kRowBytes;  // bytes between a thread's keys in a page
        const unsigned shift = unsigned(i / kPeriod) * (kPeriod * kKeyStep * kSmemRow);
        sm80::cp_async16(at_k[i % kPeriod] + shift, kp + s * kRow, bytes);
        sm80::cp_async16(at_v[i % kPeriod] + shift, vp + s * kRow, bytes);
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (S::kStageChunks % S::kThreads != 0 && tid + i * S::kThreads >= S::kStageChunks) break;
    const unsigned key = t_key + kKeyStep * i, j = j0 + kKeyStep * i;
    const bool ok = j < unsigned(key_end);
    const unsigned page = j / S::PAGE;
    const unsigned in_page = (j - page * S::PAGE) * S::kRowBytes;
    // Past the range: the sequence's first page (any valid address; nothing is read), no branch.
    const unsigned entry = unsigned(__ldg(table + (ok ? page : 0u)));
    const size_t off = size_t(entry) * kPageBytes + in_page;
    const unsigned at_k = kFixedSwizzle ? at_k0 + i * (kKeyStep * kSmemRow) : attn_sm80_stage_at_k<S>(key, t_part);
    const unsigned at_v = kFixedSwizzle ? at_v0 + i * (kKeyStep * kSmemRow) : attn_sm80_stage_at_v<S>(key, t_part);
    sm80::cp_async16(kdst + at_k, kc + off, ok ? 16 : 0);
    sm80::cp_async16(vdst + at_v, vc + off, ok ? 16 : 0);
  }
}

// fp8 decoded into a tile: the landed stage's codes → fp16 (exact; the 2^8 of E4M3 is in the
// factors), four codes per conversion.
template <class S>
__device__ __forceinline__ void attn_sm80_decode_stage(const AttnSm80Smem<S>& sm, int tid, int it) {
  const int stage = it % S::STAGES;
#pragma unroll
  for (int i = 0; i < (S::kStageChunks + S::kThreads - 1) / S::kThreads; ++i) {
    const int c = tid + i * S::kThreads;
    if (S::kStageChunks % S::kThreads != 0 && c >= S::kStageChunks) break;
    const int key = c / S::kCpr, part = c % S::kCpr;  // 16 codes: fp16 chunks 2·part, 2·part + 1
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const uint4 raw = *reinterpret_cast<const uint4*>((kv ? sm.v_pipe : sm.k_pipe) + stage * S::kStageBytes + c * 16);
      uint4 h0, h1;
      attn_fp8x4_to_half2x2<S::KV>(raw.x, h0.x, h0.y);
      attn_fp8x4_to_half2x2<S::KV>(raw.y, h0.z, h0.w);
      attn_fp8x4_to_half2x2<S::KV>(raw.z, h1.x, h1.y);
      attn_fp8x4_to_half2x2<S::KV>(raw.w, h1.z, h1.w);
      unsigned char* dst = kv ? sm.v16 : sm.k16;
      *reinterpret_cast<uint4*>(dst + attn_swizzle<S::D>(key, 2 * part)) = h0;
      *reinterpret_cast<uint4*>(dst + attn_swizzle<S::D>(key, 2 * part + 1)) = h1;
    }
  }
}

// Q's A fragments of every k-step, into registers once (16-row warps at D ≤ 128). Direct
// fp8: k-step kk of Q·Kᵀ sums d = 64·(kk / 4) + 16·tig + 4·(kk % 4) + 0..3 in the k slots
// 2·tig, +1, +8, +9 of a fragment, so a thread's K bytes of four k-steps are one 16-byte load
// (the sum is the same in any order of d); Q's fragments follow that order.
template <class S>
__device__ __forceinline__ void attn_sm80_q_frags(unsigned (&q_frag)[S::kKSteps][4], const AttnSm80Smem<S>& sm,
                                                  const AttnSm80Lane& ln) {
  const unsigned q_base = sm80::smem_address(sm.q);
#pragma unroll
  for (int kk = 0; kk < S::kKSteps; ++kk) {
    if constexpr (S::kDirect) {
      const int d = 64 * (kk / 4) + 16 * ln.tig + 4 * (kk % 4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = ln.gid + 8 * (e % 2), dd = d + 2 * (e / 2);
        q_frag[kk][e] = *reinterpret_cast<const unsigned*>(sm.q + attn_swizzle<S::D>(r, dd / 8) + (dd % 8) * 2);
      }
    } else {
      sm80::ldmatrix_x4(q_frag[kk], q_base + attn_swizzle<S::D>(ln.a_row, 2 * kk + ln.a_chunk));
    }
  }
}

// S = Q·Kᵀ for the warp's BN keys from key_row0 of the stage. Element e of n-tile n is row
// e / 2, key n·8 + 2·tig + e % 2. Direct fp8: K's B fragments from the raw stage's codes (one
// 16-byte read per key row and four k-steps, d permuted as in attn_sm80_q_frags); otherwise K
// by ldmatrix from the fp16 stage or tile at k_base.
template <class S, int QF>
__device__ __forceinline__ void attn_sm80_scores(float (&s)[S::MT][S::kNTiles][4], const unsigned (&q_frag)[QF][4],
                                                 const AttnSm80Smem<S>& sm, const AttnSm80Lane& ln, unsigned k_base,
                                                 int key_row0, int it) {
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int n = 0; n < S::kNTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
    }
  }
  if constexpr (S::kDirect) {
    const unsigned char* ks = sm.k_pipe + (it % S::STAGES) * S::kStageBytes;
#pragma unroll
    for (int h = 0; h < S::D / 64; ++h) {
      uint4 raw[S::kNTiles];
#pragma unroll
      for (int n = 0; n < S::kNTiles; ++n) {
        raw[n] = *reinterpret_cast<const uint4*>(ks + attn_fp8_k_at<S::D>(key_row0 + 8 * n + ln.gid, 4 * h + ln.tig));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        unsigned a[4];  // kDirect: D <= 128, so Q's fragments are in registers
#pragma unroll
        for (int e = 0; e < 4; ++e) a[e] = q_frag[4 * h + i][e];
#pragma unroll
        for (int n = 0; n < S::kNTiles; ++n) {
          const unsigned w = i == 0 ? raw[n].x : i == 1 ? raw[n].y : i == 2 ? raw[n].z : raw[n].w;
          unsigned b0, b1;
          attn_fp8x4_to_half2x2<S::KV>(w, b0, b1);
          sm80::mma_16816(s[0][n], a, b0, b1);
        }
      }
    }
  } else {
    const unsigned q_base = sm80::smem_address(sm.q);
    constexpr int kKUnroll = S::kKUnroll;
#pragma unroll kKUnroll
    for (int kk = 0; kk < S::kKSteps; ++kk) {
      unsigned a[S::MT][4];
#pragma unroll
      for (int mt = 0; mt < S::MT; ++mt) {
        if constexpr (S::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[kk][e];
        } else {
          sm80::ldmatrix_x4(a[mt], q_base + attn_swizzle<S::D>(ln.a_row + 16 * mt, 2 * kk + ln.a_chunk));
        }
      }
#pragma unroll
      for (int np = 0; np < S::BN / 16; ++np) {
        unsigned bk[4];
        sm80::ldmatrix_x4(bk, k_base + attn_swizzle<S::D>(key_row0 + 16 * np + ln.bk_key, 2 * kk + ln.bk_chunk));
#pragma unroll
        for (int mt = 0; mt < S::MT; ++mt) {
          sm80::mma_16816(s[mt][2 * np], a[mt], bk[0], bk[1]);
          sm80::mma_16816(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }
  }
}

// The mask (where the tile from key0 crosses some row's range) and the online softmax of one
// tile in the log2 domain: s becomes P = 2^(s·qk_scale − max), each row's max and sum move
// on, and alpha[mt][r] is the factor O's row must take. The max is taken over the unscaled
// scores (qk_scale > 0: a negative or zero factor was folded into Q), so each p is one FMA
// and one EX2. Returns whether some row's max rose (O needs rescaling).
template <class S>
__device__ __forceinline__ bool attn_sm80_online_softmax(float (&s)[S::MT][S::kNTiles][4], float (&alpha)[S::MT][2],
                                                         AttnSm80Acc<S>& acc, const AttnSm80RowKeys<S::MT>& rows,
                                                         int key0, int tig, float qk_scale) {
  const float kNegInf = __int_as_float(0xff800000);
  const bool need_mask = key0 + S::BN > rows.hi_min || (S::WINDOW > 0 && key0 < rows.lo_max);
  bool moved = false;
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
    if (need_mask) {
#pragma unroll
      for (int n = 0; n < S::kNTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 2 * S::kRowHalves; ++e) {
          const int j = key0 + n * 8 + 2 * tig + e % 2;
          if (!(j < rows.hi[mt][e / 2] && j >= rows.lo[mt][e / 2])) s[mt][n][e] = kNegInf;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < S::kRowHalves; ++r) {
      // Max and sum as trees for 16-row warps (a chain of dependent fmaxf / adds stalls the
      // warp on each); 32-row warps interleave four rows' chains and keep the registers.
      float t[S::kNTiles];
#pragma unroll
      for (int n = 0; n < S::kNTiles; ++n) t[n] = fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]);
      attn_tree<S::MT == 1, S::kNTiles>(t, [](float a, float b) { return fmaxf(a, b); });
      float mx = t[0];
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(acc.m[mt][r], mx * qk_scale);
      const float base = m_new == kNegInf ? 0.f : m_new;  // a row with nothing seen yet stays at 0
      alpha[mt][r] = acc.m[mt][r] == kNegInf ? 0.f : attn_exp2(acc.m[mt][r] - base);
      moved |= m_new != acc.m[mt][r];
      acc.m[mt][r] = m_new;
#pragma unroll
      for (int n = 0; n < S::kNTiles; ++n) {
        s[mt][n][2 * r] = attn_exp2(fmaf(s[mt][n][2 * r], qk_scale, -base));
        s[mt][n][2 * r + 1] = attn_exp2(fmaf(s[mt][n][2 * r + 1], qk_scale, -base));
        t[n] = s[mt][n][2 * r] + s[mt][n][2 * r + 1];
      }
      attn_tree<S::MT == 1, S::kNTiles>(t, [](float a, float b) { return a + b; });
      acc.l[mt][r] = acc.l[mt][r] * alpha[mt][r] + t[0];
    }
  }
  return moved;
}

template <class S>
__device__ __forceinline__ void attn_sm80_rescale_o(AttnSm80Acc<S>& acc, const float (&alpha)[S::MT][2]) {
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int n = 0; n < S::kDTiles; ++n) {
      acc.o[mt][n][0] *= alpha[mt][0];
      acc.o[mt][n][1] *= alpha[mt][0];
      if constexpr (!S::kHalfRows) {
        acc.o[mt][n][2] *= alpha[mt][1];
        acc.o[mt][n][3] *= alpha[mt][1];
      }
    }
  }
}

// O += P·V for the warp's BN keys from key_row0 of the stage: the score accumulators of key
// tiles 2j, 2j+1 are the A fragment of k-step j, all packed to fp16 before the first P·V mma
// (packed per k-step, ptxas capped a D=64 window kernel at 128 registers and spilled 28
// bytes). V by ldmatrix.trans from the fp16 stage or tile at v_base, or for direct fp8 from the
// raw stage's codes over permuted output columns (undone by the stores).
template <class S>
__device__ __forceinline__ void attn_sm80_pv(AttnSm80Acc<S>& acc, const float (&s)[S::MT][S::kNTiles][4],
                                             const AttnSm80Smem<S>& sm, const AttnSm80Lane& ln, unsigned v_base,
                                             int key_row0, int it) {
  unsigned pk[S::BN / 16][S::MT][4];
#pragma unroll
  for (int j = 0; j < S::BN / 16; ++j) {
#pragma unroll
    for (int mt = 0; mt < S::MT; ++mt) {
      // kHalfRows: rows gid + 8 are padding (zero Q rows), so their raw scores go in as they are
      // (no softmax; zero for finite K) and O's rows gid + 8 are never read. Zero constants
      // instead cost register copies of every A fragment.
      pk[j][mt][0] = attn_pack_half2(s[mt][2 * j][0], s[mt][2 * j][1]);
      pk[j][mt][1] = attn_pack_half2(s[mt][2 * j][2], s[mt][2 * j][3]);
      pk[j][mt][2] = attn_pack_half2(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
      pk[j][mt][3] = attn_pack_half2(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
    }
  }
#pragma unroll
  for (int j = 0; j < S::BN / 16; ++j) {
    const unsigned(&p)[S::MT][4] = pk[j];
    if constexpr (S::kDirect) {  // MT = 1 (one 16-row warp)
      // Output column n of d-tile dt is d = n·D/8 + dt: a thread (n = gid) needs D/8
      // contiguous bytes of each of its four key rows 2·tig, +1, +8, +9, and byte dt of two
      // rows makes one fp16x2 of the B fragment. Read 16 bytes of the rows at a time (D = 64: 8).
      constexpr int D = S::D;
      constexpr int KV = S::KV;
      const unsigned char* vs = sm.v_pipe + (it % S::STAGES) * S::kStageBytes;
      constexpr int kPart = D == 64 ? 2 : 4;  // words per row and read (one read: D <= 128)
#pragma unroll
      for (int c = 0; c < D / 32 / kPart; ++c) {
        unsigned v[4][kPart];
#pragma unroll
        for (int rr = 0; rr < 4; ++rr) {
          const int key = key_row0 + 16 * j + 2 * ln.tig + (rr % 2) + 8 * (rr / 2);
          if constexpr (D == 64) {
            const uint2 x = *reinterpret_cast<const uint2*>(vs + key * D + 8 * ln.gid);
            v[rr][0] = x.x, v[rr][1] = x.y;
          } else {
            const uint4 x = *reinterpret_cast<const uint4*>(vs + attn_fp8_v_at<D>(key, ln.gid * (D / 128) + c));
            v[rr][0] = x.x, v[rr][1] = x.y, v[rr][2] = x.z, v[rr][3] = x.w;
          }
        }
#pragma unroll
        for (int wi = 0; wi < kPart; ++wi) {
          const int dt = 4 * (c * kPart + wi);  // d-tiles dt..dt+3: bytes dt..dt+3 of the D/8 read
          sm80::mma_16816(acc.o[0][dt + 0], p[0], attn_fp8_pair_to_half2<KV, 0>(v[0][wi], v[1][wi]),
                          attn_fp8_pair_to_half2<KV, 0>(v[2][wi], v[3][wi]));
          sm80::mma_16816(acc.o[0][dt + 1], p[0], attn_fp8_pair_to_half2<KV, 1>(v[0][wi], v[1][wi]),
                          attn_fp8_pair_to_half2<KV, 1>(v[2][wi], v[3][wi]));
          sm80::mma_16816(acc.o[0][dt + 2], p[0], attn_fp8_pair_to_half2<KV, 2>(v[0][wi], v[1][wi]),
                          attn_fp8_pair_to_half2<KV, 2>(v[2][wi], v[3][wi]));
          sm80::mma_16816(acc.o[0][dt + 3], p[0], attn_fp8_pair_to_half2<KV, 3>(v[0][wi], v[1][wi]),
                          attn_fp8_pair_to_half2<KV, 3>(v[2][wi], v[3][wi]));
        }
      }
    } else {
#pragma unroll
      for (int dp = 0; dp < S::D / 16; ++dp) {
        unsigned bv[4];
        sm80::ldmatrix_x4_trans(bv, v_base + attn_swizzle<S::D>(key_row0 + 16 * j + ln.bv_key, 2 * dp + ln.bv_chunk));
#pragma unroll
        for (int mt = 0; mt < S::MT; ++mt) {
          sm80::mma_16816(acc.o[mt][2 * dp], p[mt], bv[0], bv[1]);
          sm80::mma_16816(acc.o[mt][2 * dp + 1], p[mt], bv[2], bv[3]);
        }
      }
    }
  }
}

// After the key loop (the shared buffers free): the row sums over the quad, then the warp
// columns meet: each row's common max and total sum into row_max / row_sum, and warp column 0
// ends with the sum of every column's O rescaled to that max.
template <class S>
__device__ __forceinline__ void attn_sm80_merge_warp_columns(AttnSm80Acc<S>& acc, float (&row_max)[S::MT][2],
                                                             float (&row_sum)[S::MT][2], const AttnSm80Smem<S>& sm,
                                                             const AttnSm80Lane& ln) {
  const float kNegInf = __int_as_float(0xff800000);
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int r = 0; r < S::kRowHalves; ++r) {
      acc.l[mt][r] += __shfl_xor_sync(0xffffffffu, acc.l[mt][r], 1);
      acc.l[mt][r] += __shfl_xor_sync(0xffffffffu, acc.l[mt][r], 2);
    }
  }
  if (ln.tig == 0) {
#pragma unroll
    for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
      for (int r = 0; r < S::kRowHalves; ++r) {
        sm.stat[(ln.wn * S::BM + ln.row<S>(mt, r)) * 2] = acc.m[mt][r];
        sm.stat[(ln.wn * S::BM + ln.row<S>(mt, r)) * 2 + 1] = acc.l[mt][r];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) row_max[mt][r] = kNegInf, row_sum[mt][r] = 0.f;
#pragma unroll
    for (int r = 0; r < S::kRowHalves; ++r) {
#pragma unroll
      for (int w = 0; w < S::WN; ++w)
        row_max[mt][r] = fmaxf(row_max[mt][r], sm.stat[(w * S::BM + ln.row<S>(mt, r)) * 2]);
#pragma unroll
      for (int w = 0; w < S::WN; ++w) {
        const float mw = sm.stat[(w * S::BM + ln.row<S>(mt, r)) * 2];
        row_sum[mt][r] +=
            mw == kNegInf ? 0.f : sm.stat[(w * S::BM + ln.row<S>(mt, r)) * 2 + 1] * exp2f(mw - row_max[mt][r]);
      }
    }
  }
  if constexpr (S::WN > 1) {
#pragma unroll
    for (int mt = 0; mt < S::MT; ++mt) {
      float f[S::kRowHalves];
#pragma unroll
      for (int r = 0; r < S::kRowHalves; ++r)
        f[r] = acc.m[mt][r] == kNegInf ? 0.f : exp2f(acc.m[mt][r] - row_max[mt][r]);
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 2 * S::kRowHalves; ++e) acc.o[mt][n][e] *= f[e / 2];
      }
      if (ln.wn > 0) {
#pragma unroll
        for (int n = 0; n < S::kDTiles; ++n) {
#pragma unroll
          for (int r = 0; r < S::kRowHalves; ++r) {
            *reinterpret_cast<float2*>(sm.merge + ((ln.wn - 1) * S::BM + ln.row<S>(mt, r)) * S::D + n * 8 +
                                       2 * ln.tig) = make_float2(acc.o[mt][n][2 * r], acc.o[mt][n][2 * r + 1]);
          }
        }
      }
    }
    __syncthreads();
    if (ln.wn == 0) {
#pragma unroll 1
      for (int w = 1; w < S::WN; ++w) {
#pragma unroll
        for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
          for (int n = 0; n < S::kDTiles; ++n) {
#pragma unroll
            for (int r = 0; r < S::kRowHalves; ++r) {
              const float2 v = *reinterpret_cast<const float2*>(sm.merge + ((w - 1) * S::BM + ln.row<S>(mt, r)) * S::D +
                                                                n * 8 + 2 * ln.tig);
              acc.o[mt][n][2 * r] += v.x;
              acc.o[mt][n][2 * r + 1] += v.y;
            }
          }
        }
      }
    }
  }
}

// Warp column 0 of a single split: out = O / sum · v_factor, two halves per store (a quad
// writes 16 contiguous bytes of a row; direct fp8 undoes its column permutation).
template <class S>
__device__ __forceinline__ void attn_sm80_store_rows(half_t* __restrict__ out, const AttnSm80Acc<S>& acc,
                                                     const float (&row_sum)[S::MT][2], const AttnCta& cta,
                                                     const AttnSm80Lane& ln, int kvh, float vs_factor) {
  constexpr int D = S::D;
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int r = 0; r < S::kRowHalves; ++r) {
      const int t = (cta.row0 + ln.row<S>(mt, r)) / S::G, h = (cta.row0 + ln.row<S>(mt, r)) % S::G;
      if (t >= cta.q_len) continue;
      const float inv = row_sum[mt][r] > 0.f ? vs_factor / row_sum[mt][r] : 0.f;
      half_t* dst = out + ((long long)(cta.tok0 + t) * S::HEADS + kvh * S::G + h) * D;
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
        if constexpr (S::kDirect) {  // columns 2·tig, +1 of d-tile n are d = (2·tig + e)·D/8 + n
          dst[2 * ln.tig * (D / 8) + n] = float_to_half(acc.o[mt][n][2 * r] * inv);
          dst[(2 * ln.tig + 1) * (D / 8) + n] = float_to_half(acc.o[mt][n][2 * r + 1] * inv);
        } else {
          Chunk<4> v;
          v.h[0] = float_to_half(acc.o[mt][n][2 * r] * inv).bits;
          v.h[1] = float_to_half(acc.o[mt][n][2 * r + 1] * inv).bits;
          gmem_store<4>(dst + 2 * ln.tig + n * 8, v);
        }
      }
    }
  }
}

// Warp column 0 of one of several splits: this split's O (scaled to its row max) into part_o
// [SPLIT][BM][D] and (max, sum) into part_ml [SPLIT][BM][2]; rows past the queries are
// neither written nor read.
template <class S>
__device__ __forceinline__ void attn_sm80_store_partials(float* part_o, float* part_ml, const AttnSm80Acc<S>& acc,
                                                         const float (&row_max)[S::MT][2],
                                                         const float (&row_sum)[S::MT][2], const AttnCta& cta,
                                                         const AttnSm80Lane& ln) {
  constexpr int D = S::D;
#pragma unroll
  for (int mt = 0; mt < S::MT; ++mt) {
#pragma unroll
    for (int r = 0; r < S::kRowHalves; ++r) {
      if ((cta.row0 + ln.row<S>(mt, r)) / S::G >= cta.q_len) continue;
      float* dst = part_o + (cta.split * S::BM + ln.row<S>(mt, r)) * D;
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
        if constexpr (S::kDirect) {
          __stcg(dst + 2 * ln.tig * (D / 8) + n, acc.o[mt][n][2 * r]);
          __stcg(dst + (2 * ln.tig + 1) * (D / 8) + n, acc.o[mt][n][2 * r + 1]);
        } else {
          __stcg(reinterpret_cast<float2*>(dst + 2 * ln.tig + n * 8),
                 make_float2(acc.o[mt][n][2 * r], acc.o[mt][n][2 * r + 1]));
        }
      }
      if (ln.tig == 0) {
        __stcg(reinterpret_cast<float2*>(part_ml + (cta.split * S::BM + ln.row<S>(mt, r)) * 2),
               make_float2(row_max[mt][r], row_sum[mt][r]));
      }
    }
  }
}

template <int HEADS, int KVH, int D, int PAGE, int KV, bool SCALE_PER_HEAD, bool CAUSAL, int WINDOW, int QLEN, int BM,
          int BN, int WN, int MT, int STAGES, int SPLIT, int SMEM_BYTES, int MINKEYS = kSplitMinKeys>
__global__ void __launch_bounds__(BM / (16 * MT) * WN * 32, 1)
    attention_sm80_kernel(half_t* __restrict__ out, const half_t* __restrict__ q, const void* __restrict__ k_cache,
                          const void* __restrict__ v_cache, const float* __restrict__ k_scale,
                          const float* __restrict__ v_scale, const int* __restrict__ block_table, int max_pages,
                          const int* __restrict__ seq_lens, const int* __restrict__ cu_q, float sm_scale,
                          float* __restrict__ partial, int* __restrict__ counters, int tables_from_host) {
  // Decode and verify whose batch tables came from the host (attention::Args::tables_from_host)
  // read them, and ask L2 for their first stages' keys and values, before the wait for the
  // kernel before this one (common/grid.cuh); every other launch waits first.
  constexpr bool kEarlyStages = QLEN > 0;
  const bool early_tables = kEarlyStages && tables_from_host != 0;
  if (!early_tables) {
    grid_dependency_sync();
  }
  using S = AttnSm80Shape<HEADS, KVH, D, PAGE, KV, SCALE_PER_HEAD, CAUSAL, WINDOW, QLEN, BM, BN, WN, MT, STAGES, SPLIT>;
  static_assert(S::kSmemBytes == SMEM_BYTES, "codegen's shared size");
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char smem[];
  const AttnSm80Smem<S> sm(smem);
  const int tid = threadIdx.x;
  AttnSm80Lane ln = AttnSm80Lane::of<S>(tid);
  const int kvh = blockIdx.y;

  // The CTA's rows and keys; a CTA with no rows, or a split with no keys, has nothing to do.
  AttnCta cta;
  if (!attn_cta<S::G, BM, BN, QLEN, CAUSAL, WINDOW, SPLIT, MINKEYS>(seq_lens, cu_q, cta)) return;
  const int iters = (cta.tile_end - cta.tile_begin + WN - 1) / WN;  // K/V stages
  const int key_end = min(cta.hi, cta.lo + cta.tile_end * BN);      // keys past it are zero-filled and never seen

  // The first stages: their page entries all at once, then their copies; the next stage's
  // entries are read one iteration before its copies (AttnSm80Pages). Decode and verify read
  // the entries before the Q tile's loads and issue the copies before Q's barrier, so the page
  // table's round trip overlaps Q's instead of following it (a short CTA's path is a few such
  // round trips); prefill, whose CTAs stream many stages, keeps them after Q.
  const int* table = block_table + (long long)cta.b * max_pages;
  AttnSm80Pages<S> lead[kEarlyStages ? STAGES - 1 : 1];
  if constexpr (kEarlyStages) {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) lead[s] = attn_sm80_stage_pages<S>(table, cta, key_end, s);
    if (early_tables) {
#pragma unroll
      for (int s = 0; s < STAGES - 1; ++s) {
        if (s < iters) attn_sm80_prefetch_stage<S>(k_cache, v_cache, cta, key_end, kvh, tid, s, lead[s]);
      }
      grid_dependency_sync();
    }
  }

  float ks_factor, vs_factor;
  attn_kv_factors<KV, SCALE_PER_HEAD>(k_scale, v_scale, kvh, ks_factor, vs_factor);
  float qk_scale = sm_scale * ks_factor * kLog2e;
  // The softmax takes its max over unscaled scores, so it needs qk_scale > 0: a negative scale
  // negates Q instead (exact in fp16) and zero becomes one too small to matter (all p = 1).
  const bool negate_q = qk_scale <= 0.f;
  if (negate_q) qk_scale = qk_scale < 0.f ? -qk_scale : 1e-30f;

  // Q tile (rows past the sequence's queries are zero), swizzled like K and V.
  // D = 256 (240 registers) keeps one part after the other: batches spill there.
  attn_load_q<HEADS, S::G, D, BM, S::kThreads, D <= 128 ? 4 : 1>(
      q, cta, kvh, tid, [&](int r, int part) { return reinterpret_cast<Chunk<16>*>(sm.q + attn_swizzle<D>(r, part)); },
      negate_q);
  if constexpr (kEarlyStages) {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < iters) attn_sm80_issue_stage<S>(sm, k_cache, v_cache, table, cta, key_end, kvh, tid, s, lead[s]);
      sm80::cp_async_commit();
    }
  }
  const AttnSm80RowKeys<MT> rows = attn_sm80_row_keys<S>(cta, ln);
  AttnSm80Acc<S> acc;
  acc.clear();
  __syncthreads();  // Q is in shared memory
  ln.set_ldmatrix_roles<S>(tid);
  unsigned q_frag[S::kQInRegs ? S::kKSteps : 1][4];
  if constexpr (S::kQInRegs) attn_sm80_q_frags<S>(q_frag, sm, ln);

  if constexpr (!kEarlyStages) {  // the same two loops as above, after Q
    AttnSm80Pages<S> first[STAGES - 1];
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) first[s] = attn_sm80_stage_pages<S>(table, cta, key_end, s);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < iters) attn_sm80_issue_stage<S>(sm, k_cache, v_cache, table, cta, key_end, kvh, tid, s, first[s]);
      sm80::cp_async_commit();
    }
  }
  AttnSm80Pages<S> next = attn_sm80_stage_pages<S>(table, cta, key_end, STAGES - 1);
  const bool warp_has_rows = (cta.row0 + ln.wm * S::kWarpRows) / S::G < cta.q_len;  // else all its rows are padding
  for (int it = 0; it < iters; ++it) {
    sm80::cp_async_wait<STAGES - 2>();
    __syncthreads();  // stage `it` landed for every thread; every warp is done with it - 1
    if (it + STAGES - 1 < iters) {
      attn_sm80_issue_stage<S>(sm, k_cache, v_cache, table, cta, key_end, kvh, tid, it + STAGES - 1, next);
      if (it + STAGES < iters) next = attn_sm80_stage_pages<S>(table, cta, key_end, it + STAGES);
    }
    sm80::cp_async_commit();
    unsigned k_base, v_base;
    if constexpr (S::kF16 || S::kDirect) {
      k_base = sm80::smem_address(sm.k_pipe + (it % STAGES) * S::kStageBytes);
      v_base = sm80::smem_address(sm.v_pipe + (it % STAGES) * S::kStageBytes);
    } else {
      attn_sm80_decode_stage<S>(sm, tid, it);
      __syncthreads();
      k_base = sm80::smem_address(sm.k16);
      v_base = sm80::smem_address(sm.v16);
    }
    const int tile = cta.tile_begin + it * WN + ln.wn;
    const int key0 = cta.lo + tile * BN;
    // Warp-uniform: no divergence around mma.sync.
    if (!warp_has_rows || tile >= cta.tile_end || key0 >= rows.hi_max || key0 + BN <= rows.lo_min) continue;
    const int key_row0 = ln.wn * BN;  // the warp's keys in the stage

    float s[MT][S::kNTiles][4];  // S = Q·Kᵀ, then P
    attn_sm80_scores<S>(s, q_frag, sm, ln, k_base, key_row0, it);
    float alpha[MT][2];
    const bool moved = attn_sm80_online_softmax<S>(s, alpha, acc, rows, key0, ln.tig, qk_scale);
    // Once the maxima settle (most tiles of a long context) no row moves and the warp skips
    // the D/2 multiplies per row; an unmoved row has alpha = 1 or holds no weight yet (O = 0).
    if (__any_sync(0xffffffffu, moved)) attn_sm80_rescale_o<S>(acc, alpha);
    attn_sm80_pv<S>(acc, s, sm, ln, v_base, key_row0, it);  // O += P·V
  }
  sm80::cp_async_wait<0>();
  __syncthreads();  // the buffers are free for the merge

  float row_max[MT][2], row_sum[MT][2];
  attn_sm80_merge_warp_columns<S>(acc, row_max, row_sum, sm, ln);
  if (SPLIT == 1 || cta.n_splits == 1) {  // a short context's single split writes out directly
    if (ln.wn != 0) return;
    attn_sm80_store_rows<S>(out, acc, row_sum, cta, ln, kvh, vs_factor);
  } else if constexpr (SPLIT > 1) {
    // Partials of (b, kvh, rb), then the last CTA of the slot merges.
    float *part_o, *part_ml;
    const long long slot = attn_split_slot<KVH, S::G, D, BM, QLEN, SPLIT>(partial, cta, kvh, part_o, part_ml);
    if (ln.wn == 0) attn_sm80_store_partials<S>(part_o, part_ml, acc, row_max, row_sum, cta, ln);
    attn_merge_splits<HEADS, KVH, S::G, D, BM, SPLIT, S::kThreads, QLEN>(out, part_o, part_ml, counters, slot,
                                                                         sm.is_last, sm.merge, cta, kvh, vs_factor);
  }
}

}  // namespace onecat
