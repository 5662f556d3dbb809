// sm_80+ building blocks shared by the tensor-core kernels (gemm mma16816 pipe 1 and 2,
// tc_small, attention atom=m16n8k16): shared-state-space addresses, cp.async with zero fill,
// ldmatrix, mma.sync.m16n8k16 (fp16 in, fp32 accumulate). Fragment layouts (PTX ISA, "Matrix
// Fragments for mma.m16n8k16"), lane = 4·gid + tig:
//   A 16×16 (row-major): reg0 (row gid, k 2tig..+1), reg1 (row gid+8, same k), reg2 (row gid,
//     k 2tig+8..+9), reg3 (row gid+8, k 2tig+8..+9); lower half = lower k.
//   B 16×8 (k × n): reg0 (k 2tig..+1, n gid), reg1 (k 2tig+8..+9, n gid).
//   C 16×8 fp32: c0,c1 (row gid, n 2tig..+1), c2,c3 (row gid+8, n 2tig..+1).
#pragma once

namespace onecat::sm80 {

// The shared-state-space address of a pointer into shared memory (what cp.async and ldmatrix take).
__device__ __forceinline__ unsigned smem_address(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// 16 bytes global → shared, bypassing L1; src_bytes 0 writes zeros and reads nothing (rows
// past the last token or key).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// Lanes 8i..8i+7 give the row addresses of matrix i; register i receives matrix i.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a · b for one m16n8k16 tile. VOLATILE = false lets the compiler move it among the
// fragment loads (it only reads and writes registers).
template <bool VOLATILE = true>
__device__ __forceinline__ void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                          unsigned b1) {
  if constexpr (VOLATILE) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}
template <bool VOLATILE = true>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  mma_16816<VOLATILE>(d, a[0], a[1], a[2], a[3], b0, b1);
}

}  // namespace onecat::sm80
