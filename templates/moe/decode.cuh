// moe op=decode: a whole mixture-of-experts layer for a few tokens in one launch (route,
// gate_up, down, combine), so that a decode step pays one launch for the layer instead of four
// (a launch's fixed cost is about a third of the 4-bit layer's weight streaming at one token).
// Each pair (token, slot) owns GU_BLOCKS + DN_BLOCKS CTAs: with INTERLEAVE consecutive ones,
// else GU_BLOCKS in the grid's first part (every pair's, pair after pair) and DN_BLOCKS in its
// second, so that the gate_up work is scheduled first as in separate launches (CTAs start
// roughly in index order; nothing below depends on it). A CTA takes a ticket from its pair's
// counter when it starts: the pair's first GU_BLOCKS tickets are gate_up CTAs
// (ROWS output rows of h each), the rest down CTAs (DOWN_ROWS rows of y). A CTA routes its
// pair's token itself (one warp, route_token: the same bits as op=route) and runs the gemv of
// op=gate_up / op=down on that pair alone (moe_gemv_rows, one pair per tile). A gate_up CTA
// publishes its rows of h by counting itself into its pair's ready counter (release); a down
// CTA asks L2 for its weight rows, then waits for that counter to reach GU_BLOCKS (acquire) and
// reads h through L2. Tickets make the wait safe on any GPU and in any CTA order: every gate_up
// CTA of a pair holds a lower ticket than its down CTAs, so it had started (and is resident)
// before any of them could wait on it, and it waits on nothing itself. The counters are per
// pair, so no address takes more than one pair's CTAs' atomics (one counter for the whole grid
// serialised tens of thousands of them).
// The last down CTA of a (token, row block) — a counter again — combines the token's TOPK rows
// of y in slot order, as op=combine does (same sum, same order: the output does not depend on
// which CTA came last), and zeroes that counter; the last down CTA of a pair zeroes the pair's
// counters (every CTA of the pair has taken its ticket and passed its wait by then). So the
// workspace — [pairs][8] (ticket, ready, down CTAs done; 32 bytes a pair), then
// [tokens][DN_BLOCKS] — is zeroed once, when allocated. ids and weights (op=route's,
// [tokens][TOPK]), where not null, get each pair's expert and routing weight.
#pragma once
#include "common/grid.cuh"
#include "moe/gemv.cuh"
#include "moe/route.cuh"

namespace onecat {

__device__ __forceinline__ unsigned atomic_add_acq_rel_gpu(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <class GuFmt, class DnFmt, int HIDDEN, int INTER, int EXPERTS, int TOPK, bool NORM, bool SIGMOID, bool BIAS,
          int RGROUPS, int TOPK_GROUPS, int WARPS, int ROWS, int DOWN_ROWS, int GROUPS, int SHARED, bool ACT_ORDER,
          bool INTERLEAVE, int OCC>
__global__ void __launch_bounds__(WARPS* kWarpSize, OCC)
    moe_decode_kernel(half_t* __restrict__ out, const half_t* __restrict__ x, const half_t* __restrict__ logits,
                      int tokens, const float* __restrict__ bias, float scale, const void* __restrict__ gu_qweight,
                      const void* __restrict__ gu_scales, const void* __restrict__ gu_zeros,
                      const int* __restrict__ gu_perm, const float* __restrict__ gu_global_scales,
                      long long gu_qweight_stride, long long gu_scales_stride, long long gu_zeros_stride,
                      const void* __restrict__ dn_qweight, const void* __restrict__ dn_scales,
                      const void* __restrict__ dn_zeros, const int* __restrict__ dn_perm,
                      const float* __restrict__ dn_global_scales, long long dn_qweight_stride,
                      long long dn_scales_stride, long long dn_zeros_stride, half_t* h, float* y,
                      const half_t* __restrict__ shared, const half_t* __restrict__ shared_gate, int* __restrict__ ids,
                      float* __restrict__ weights, unsigned* sync) {
  grid_dependency_sync();
  constexpr int kThreads = WARPS * kWarpSize;
  constexpr int kGuBlocks = (INTER + ROWS - 1) / ROWS;
  constexpr int kDnBlocks = (HIDDEN + DOWN_ROWS - 1) / DOWN_ROWS;
  __shared__ unsigned s_ticket;
  __shared__ int s_expert[TOPK];
  __shared__ float s_weight[TOPK];
  __shared__ int s_flag;
  const int pairs = tokens * TOPK;
  const int b = blockIdx.x;
  const int p = INTERLEAVE            ? b / (kGuBlocks + kDnBlocks)
                : b < pairs * kGuBlocks ? b / kGuBlocks
                                        : (b - pairs * kGuBlocks) / kDnBlocks;
  unsigned* const mine = sync + 8 * p;  // [0] tickets, [1] gate_up CTAs done, [2] down CTAs done
  unsigned* const arrived = sync + 8 * pairs;  // [tokens][kDnBlocks]: down CTAs done

  const int token = p / TOPK;
  // The ticket's round trip overlaps the routing: the pair, and so the token, is the CTA's own.
  unsigned ticket_of_cta = 0u;
  if (threadIdx.x == 0) ticket_of_cta = atomicAdd(mine, 1u);
  if (threadIdx.x < kWarpSize) {
    int chosen[TOPK];
    float chosen_w[TOPK];
    const float denom = route_token<EXPERTS, TOPK, NORM, SIGMOID, BIAS, RGROUPS, TOPK_GROUPS>(
        logits + static_cast<long long>(token) * EXPERTS, bias, threadIdx.x, chosen, chosen_w);
    if (threadIdx.x < TOPK) {
      float w = 0.f;
      int e = 0;
#pragma unroll
      for (int k = 0; k < TOPK; ++k) {
        if (k == int(threadIdx.x)) w = chosen_w[k], e = chosen[k];
      }
      s_expert[threadIdx.x] = e;
      s_weight[threadIdx.x] = w / denom * scale;
    }
    if (threadIdx.x == 0) s_ticket = ticket_of_cta;
  }
  __syncthreads();
  const int ticket = int(s_ticket);
  const bool gate_up = ticket < kGuBlocks;
  const int block = gate_up ? ticket : ticket - kGuBlocks;
  const int e = s_expert[p % TOPK];
  const MoeTile tile{e, e, 0, 1};
  const int pair[1] = {p};

  if (gate_up) {
    if (block == 0 && threadIdx.x == 0 && ids != nullptr) ids[p] = e, weights[p] = s_weight[p % TOPK];
    const MoeExpert ex = moe_expert<HIDDEN, ACT_ORDER>(tile, gu_qweight, gu_scales, gu_zeros, gu_perm, gu_global_scales,
                                                       gu_qweight_stride, gu_scales_stride, gu_zeros_stride);
    moe_gemv_rows<GuFmt, 2 * INTER, HIDDEN, TOPK, 1, ROWS, WARPS, 1, 1, true, ACT_ORDER>(h, x, ex, pair, 1, block);
    // Every thread's rows of h are stored (the barrier); the release publishes them.
    __syncthreads();
    if (threadIdx.x == 0) atomic_add_acq_rel_gpu(mine + 1, 1u);
  } else {
    const MoeExpert ex = moe_expert<INTER, ACT_ORDER>(tile, dn_qweight, dn_scales, dn_zeros, dn_perm, dn_global_scales,
                                                      dn_qweight_stride, dn_scales_stride, dn_zeros_stride);
    // This CTA's weight rows (contiguous) into L2 while the pair's gate_up CTAs finish.
    {
      constexpr int kRowBytes = INTER / DnFmt::kPerChunk * 16;
      const char* first = ex.w + static_cast<long long>(block) * DOWN_ROWS * kRowBytes;
      const int bytes = (min((block + 1) * DOWN_ROWS, HIDDEN) - block * DOWN_ROWS) * kRowBytes;
      for (int b = threadIdx.x * 128; b < bytes; b += kThreads * 128) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(first + b));
      }
    }
    if (threadIdx.x == 0) {
      while (load_acquire_gpu(mine + 1) < unsigned(kGuBlocks)) __nanosleep(64);
    }
    __syncthreads();
    moe_gemv_rows<DnFmt, HIDDEN, INTER, TOPK, 1, DOWN_ROWS, WARPS, 1, GROUPS, false, ACT_ORDER, true>(y, h, ex, pair, 1,
                                                                                                      block);
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned* counter = arrived + token * kDnBlocks + block;
      s_flag = atomic_add_acq_rel_gpu(counter, 1u) == unsigned(TOPK - 1);
      if (s_flag) *counter = 0u;  // the token's row block is complete: ready for the next launch
    }
    __syncthreads();
    if (s_flag) {  // the last of the token's TOPK down CTAs of this row block: combine them
      float gate = 1.f;
      if constexpr (SHARED == 2) gate = 1.f / (1.f + __expf(-half_to_float(shared_gate[token])));
      const float* rows = y + static_cast<long long>(token) * TOPK * HIDDEN;
      for (int n = block * DOWN_ROWS + threadIdx.x; n < min((block + 1) * DOWN_ROWS, HIDDEN); n += kThreads) {
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < TOPK; ++k) sum += s_weight[k] * __ldcg(rows + k * HIDDEN + n);
        if constexpr (SHARED != 0) sum += gate * half_to_float(shared[static_cast<long long>(token) * HIDDEN + n]);
        out[static_cast<long long>(token) * HIDDEN + n] = float_to_half(sum);
      }
    }
    // The pair's last down CTA: its gate_up CTAs are done and every down CTA has passed its
    // wait, so the pair's counters go back to 0 for the next launch.
    if (threadIdx.x == 0 && atomicAdd(mine + 2, 1u) == unsigned(kDnBlocks - 1)) mine[0] = 0u, mine[1] = 0u, mine[2] = 0u;
  }
}

}  // namespace onecat
