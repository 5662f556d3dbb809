// What the sampling kernels share: the per-row parameter struct, the Philox generator, the
// logit sanitising and penalties (bit for bit as runtime/cpu/sampling does them), the order
// key, and block-wide reductions and scans through shared memory.
// Device code only through __syncthreads and shared-memory atomics (no warp intrinsics), so
// tests/sampling_emulator.h can run these bodies on the CPU.
#pragma once

// #pragma unroll (and unroll 1: loops over bins and tree levels stay loops, or the
// kernel's code and register use explode), which the host compiler of tests/sampling_emulator.h does not know.
#ifndef ONECAT_EMULATED_CTA
#define ONECAT_SAMPLING_UNROLL _Pragma("unroll")
#define ONECAT_SAMPLING_NO_UNROLL _Pragma("unroll 1")
#else
#define ONECAT_SAMPLING_UNROLL
#define ONECAT_SAMPLING_NO_UNROLL
#endif

namespace onecat {
namespace sampling {

typedef unsigned long long u64;

// One row's settings: the layout of codegen/sampling/row_params.h's RowParams (the host's
// name; tests/sampling_kernel_test.cpp checks that the two agree).
struct KernelRowParams {
  float temperature;  // < kGreedyTemperature: greedy
  float top_p;        // ≥ 1: off
  float min_p;        // ≤ 0: off
  float repetition_penalty;
  float presence_penalty;
  float frequency_penalty;
  int top_k;     // ≤ 0: off
  int logprobs;  // top logprobs wanted (clamped to the spec's)
  u64 seed;
  u64 step;           // this token's index in the sequence's output: the Philox counter
  int prompt_length;  // the first prompt_length ids of the row's history are the prompt's
  int reserved;
};

// vLLM's _SAMPLING_EPS, as runtime/cpu/sampling.h's kGreedyTemperature.
struct Limits {
  static constexpr float kGreedyTemperature = 1e-5f;
};

__device__ __forceinline__ float negative_infinity() { return __int_as_float(0xff800000); }

// NaN → −inf, +inf → FLT_MAX, −0 → +0 (cpu::sanitize_logit).
__device__ __forceinline__ float sanitize_logit(float v) {
  if (v != v) return negative_infinity();
  if (v == __int_as_float(0x7f800000)) return __int_as_float(0x7f7fffff);
  return v == 0.0f ? 0.0f : v;
}

// Larger float → larger key; equal floats (no NaN, no −0) → equal keys.
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}
// Token (key, id) as one number: larger means earlier in the sampling order (value
// descending, id ascending). Every real token packs to more than 0.
__device__ __forceinline__ u64 pack_order(unsigned key, int id) {
  return (u64(key) << 32) | u64(0xffffffffu - unsigned(id));
}
__device__ __forceinline__ unsigned packed_key(u64 p) { return unsigned(p >> 32); }
__device__ __forceinline__ int packed_id(u64 p) { return int(0xffffffffu - unsigned(p & 0xffffffffu)); }

// Philox-4x32-10 (Salmon et al., SC'11), the first word of the block for (seed, step):
// key = seed, counter = (step, 0). cpu::philox4x32_10 is the same function.
__device__ __forceinline__ unsigned philox_first_word(u64 seed, u64 step) {
  unsigned c0 = unsigned(step), c1 = unsigned(step >> 32), c2 = 0, c3 = 0;
  unsigned k0 = unsigned(seed), k1 = unsigned(seed >> 32);
  ONECAT_SAMPLING_NO_UNROLL
  for (int round = 0; round < 10; ++round) {
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}
// u ∈ (0, 1], exact in fp32 (cpu::philox_uniform).
__device__ __forceinline__ float philox_uniform(u64 seed, u64 step) {
  return float((philox_first_word(seed, step) >> 8) + 1u) * 5.9604644775390625e-8f;  // 2^-24
}

// The penalised logit of a token seen in the history: `seen` is 1 if it is in the prompt plus
// 2 per time it is in the output. One rounded operation each, in cpu::penalized_logits's
// order (the intrinsics keep the compiler from fusing them).
// a / b rounded to nearest as IEEE division gives it (the CPU's `/`), for a finite and b > 0
// finite, without a division instruction: __fdiv_rn and __frcp_rn call a slow-path subroutine,
// and the call spills registers. b = m · 2^e with m ∈ [1, 2); an approximate 1/m (2 ulp) and
// two Newton steps in double give 1/m to about 2^-80, one corrected product a/m within one
// double ulp, and the exact scaling by 2^-e keeps that. A quotient of two floats that is not a
// float rounding boundary lies at least 2^-49 (relative) from every boundary, so rounding that
// double to float is exact.
__device__ __forceinline__ float divide_rn(float a, float b) {
  unsigned bits = __float_as_uint(b);
  int e = int((bits >> 23) & 0xffu) - 127;
  if (e == -127) {  // subnormal b: scale by 2^64 (exact) first
    bits = __float_as_uint(b * 18446744073709551616.0f);
    e = int((bits >> 23) & 0xffu) - 127 - 64;
  }
  const float m = __uint_as_float((bits & 0x007fffffu) | 0x3f800000u);
  const double md = m, ad = a;
  double r = __fdividef(1.0f, m);
  r = r * fma(-md, r, 2.0);
  r = r * fma(-md, r, 2.0);
  double q = ad * r;
  q = fma(fma(-q, md, ad), r, q);
  const double scale = __longlong_as_double((long long)(1023 - e) << 52);  // 2^-e, e ∈ [-213, 127]
  return __double2float_rn(q * scale);
}

__device__ __forceinline__ float penalize(float v, unsigned seen, const KernelRowParams& p) {
  if (p.repetition_penalty != 1.0f) v = v > 0.0f ? divide_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
  const unsigned count = seen >> 1;
  if (count > 0) {
    const float frequency = __fmul_rn(p.frequency_penalty, __uint2float_rn(count));
    v = __fsub_rn(v, frequency);
    v = __fsub_rn(v, p.presence_penalty);
  }
  return v == 0.0f ? 0.0f : v;
}

// Block-wide reduction of one value per thread with a commutative, associative op, through
// THREADS slots of shared memory in a fixed tree (so the result never depends on timing).
// Every thread of the block calls it and gets the result.
template <int THREADS, class Op>
__device__ __forceinline__ u64 block_reduce(u64 v, u64* slots, Op op) {
  static_assert((THREADS & (THREADS - 1)) == 0, "THREADS is a power of two");
  const int t = threadIdx.x;
  slots[t] = v;
  __syncthreads();
  ONECAT_SAMPLING_NO_UNROLL
  for (int half = THREADS / 2; half > 0; half /= 2) {
    if (t < half) slots[t] = op(slots[t], slots[t + half]);
    __syncthreads();
  }
  const u64 r = slots[0];
  __syncthreads();
  return r;
}

struct SumOp {
  __device__ __forceinline__ u64 operator()(u64 a, u64 b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};

// Exclusive prefix sum in thread order, and the sum of all (returned, not through a pointer,
// so nothing lands in local memory).
struct Scan {
  u64 before, total;
};
template <int THREADS>
__device__ __forceinline__ Scan block_exclusive_scan(u64 v, u64* slots) {
  const int t = threadIdx.x;
  slots[t] = v;
  __syncthreads();
  ONECAT_SAMPLING_NO_UNROLL
  for (int offset = 1; offset < THREADS; offset *= 2) {
    const u64 add = t >= offset ? slots[t - offset] : 0ull;
    __syncthreads();
    slots[t] += add;
    __syncthreads();
  }
  const Scan r{slots[t] - v, slots[THREADS - 1]};
  __syncthreads();
  return r;
}

// Sorts list[0, n) descending (n a power of two) with THREADS threads.
template <int THREADS>
__device__ __forceinline__ void block_sort_descending(u64* list, int n) {
  ONECAT_SAMPLING_NO_UNROLL
  for (int k = 2; k <= n; k *= 2) {
    ONECAT_SAMPLING_NO_UNROLL
    for (int j = k / 2; j > 0; j /= 2) {
      ONECAT_SAMPLING_NO_UNROLL
      for (int i = threadIdx.x; i < n; i += THREADS) {
        const int partner = i ^ j;
        if (partner > i) {
          const u64 a = list[i], b = list[partner];
          const bool descending = (i & k) == 0;
          if (descending ? a < b : a > b) {
            list[i] = b;
            list[partner] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace sampling
}  // namespace onecat
