// The sm_80+ building blocks of attention beyond common/sm80.cuh (mma.sync m16n8k16,
// ldmatrix, cp.async, fragment layouts): fp32 pairs to fp16x2, an XOR-swizzled fp16 tile
// address and the fp8 → fp16 decode of four codes at once.
#pragma once
#include "attention/kv_format.cuh"
#include "common/sm80.cuh"

namespace onecat {

// fp16x2 of (lo, hi), lo in the lower half (the lower k of an A fragment register).
__device__ __forceinline__ unsigned attn_pack_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// 2^x with one MUFU.EX2 (exp2f's denormal handling costs three more instructions; results below
// 2^-126 flush to zero, negligible next to the row maximum's 1). 2^-inf = 0.
__device__ __forceinline__ float attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Byte offset of 16-byte chunk `chunk` of row `row` in an fp16 tile of D halves per row.
// The chunk index is XORed with row % 8: the 8 rows an ldmatrix matrix reads (8 consecutive
// rows, one logical chunk) land in 8 different 16-byte bank groups, and a warp's cp.async
// writes along a row stay conflict-free. Needs D / 8 ≥ 8 chunks per row (D ≥ 64).
template <int D>
__device__ __forceinline__ int attn_swizzle(int row, int chunk) {
  static_assert(D % 64 == 0, "the swizzle permutes 8 chunks");
  return row * (D * 2) + ((chunk ^ (row & 7)) << 4);
}

// fp8 stages read straight into fragments (one row warp, D ≤ 128; attention_sm80.cuh): byte
// offset of 16-byte chunk `chunk` of key row `key` (D bytes). K is read as 16 bytes at chunk
// 4·h + tig by rows key, key + 1 in one quarter warp: chunk ^ 4 on odd rows keeps them apart.
// V is read as D/8 bytes at gid·D/8 by the rows 2·tig (+1, +8, +9): key & 6 spreads rows 0, 2,
// 4, 6 over the eight 16-byte bank groups. D = 64 stays unswizzled (two rows share a 128-byte line).
template <int D>
__device__ __forceinline__ int attn_fp8_k_at(int key, int chunk) {
  static_assert(D == 64 || D == 128, "direct fp8 fragments: D <= 128");
  return key * D + ((chunk ^ (D == 128 ? (key & 1) << 2 : 0)) << 4);
}
template <int D>
__device__ __forceinline__ int attn_fp8_v_at(int key, int chunk) {
  static_assert(D == 64 || D == 128, "direct fp8 fragments: D <= 128");
  return key * D + ((chunk ^ (D == 128 ? (key & 6) : 0)) << 4);
}

}  // namespace onecat
