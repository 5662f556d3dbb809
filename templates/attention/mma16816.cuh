// The sm_80+ building blocks of attention: mma.sync m16n8k16 (fp16 in, fp32 accumulate),
// ldmatrix (.trans for V), cp.async with zero fill, an XOR-swizzled fp16 tile address and
// the fp8 → fp16 decode of four codes at once. Fragment layouts (PTX ISA, "Matrix Fragments
// for mma.m16n8k16"), lane = 4·gid + tig:
//   A 16×16 (row-major): reg0 (row gid, k 2tig..+1), reg1 (row gid+8, same k), reg2 (row gid,
//     k 2tig+8..+9), reg3 (row gid+8, k 2tig+8..+9); lower half = lower k.
//   B 16×8 (k × n): reg0 (k 2tig..+1, n gid), reg1 (k 2tig+8..+9, n gid).
//   C 16×8 fp32: c0,c1 (row gid, n 2tig..+1), c2,c3 (row gid+8, n 2tig..+1).
#pragma once
#include "attention/kv_format.cuh"

namespace onecat {

__device__ __forceinline__ unsigned attn_smem(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// 16 bytes global → shared, bypassing L1; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void attn_cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void attn_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void attn_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// Lanes 8i..8i+7 give the row addresses of matrix i; register i receives matrix i.
__device__ __forceinline__ void attn_ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void attn_ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a · b for one m16n8k16 tile.
__device__ __forceinline__ void attn_mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// fp16x2 of (lo, hi), lo in the lower half (the lower k of an A fragment register).
__device__ __forceinline__ unsigned attn_pack_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
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

// Four fp8 codes (a 32-bit word, code 0 in the low byte) → two fp16x2 words (codes 0,1 and
// 2,3), the same values as KvFormat<KV>::decode: E5M2 is the top byte of an fp16; E4M3 moves
// the E5M2 form's magnitude one bit down (code · 2^-8, VOLTA.md) and keeps the sign.
template <int KV>
__device__ __forceinline__ void attn_fp8x4_to_half2x2(unsigned w, unsigned& lo, unsigned& hi) {
  asm("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(lo) : "r"(w));  // bytes: 0, c0, 0, c1
  asm("prmt.b32 %0, %1, 0, 0x3424;" : "=r"(hi) : "r"(w));  // bytes: 0, c2, 0, c3
  if constexpr (KV == kKvE4m3) {
    lo = (lo & 0x80008000u) | ((lo >> 1) & 0x3F803F80u);
    hi = (hi & 0x80008000u) | ((hi >> 1) & 0x3F803F80u);
  }
}

}  // namespace onecat
