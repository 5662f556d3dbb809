// WMMA m16n16k16 (fp16 in, fp32 accumulate) written in PTX, as attention uses it: on sm_70
// each is Volta's HMMA.884 sequence, on sm_80+ HMMA.16816. Fragment layouts are opaque, so
// attention learns the row of each accumulator element once per kernel (wmma_rows).
#pragma once

namespace onecat {

struct AttnAcc {
  float v[8];
};

struct AttnFrag {
  unsigned r[8];
};

#define ONECAT_WMMA_FRAG_OUT(f)                                                                              \
  "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]), "=r"(f.r[6]), \
      "=r"(f.r[7])

// a: 16×16 row-major, stride ld halves (shared memory).
__device__ __forceinline__ void attn_load_a(AttnFrag& f, const half_t* a, int ld) {
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : ONECAT_WMMA_FRAG_OUT(f)
               : "l"(a), "r"(ld));
}

// b: 16×16 column-major (element (k, n) at n*ld + k): K rows, d contiguous.
__device__ __forceinline__ void attn_load_b_col(AttnFrag& f, const half_t* b, int ld) {
  asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : ONECAT_WMMA_FRAG_OUT(f)
               : "l"(b), "r"(ld));
}

// b: 16×16 row-major (element (k, n) at k*ld + n): V rows, d contiguous.
__device__ __forceinline__ void attn_load_b_row(AttnFrag& f, const half_t* b, int ld) {
  asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : ONECAT_WMMA_FRAG_OUT(f)
               : "l"(b), "r"(ld));
}

#undef ONECAT_WMMA_FRAG_OUT

#define ONECAT_WMMA_MMA(LAYOUT)                                                                                \
  asm volatile("wmma.mma.sync.aligned." LAYOUT                                                                 \
               ".m16n16k16.f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "                                                \
               "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, {%0,%1,%2,%3,%4,%5,%6,%7};" \
               : "+f"(acc.v[0]), "+f"(acc.v[1]), "+f"(acc.v[2]), "+f"(acc.v[3]), "+f"(acc.v[4]), "+f"(acc.v[5]), \
                 "+f"(acc.v[6]), "+f"(acc.v[7])                                                                \
               : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(a.r[4]), "r"(a.r[5]), "r"(a.r[6]),      \
                 "r"(a.r[7]), "r"(b.r[0]), "r"(b.r[1]), "r"(b.r[2]), "r"(b.r[3]), "r"(b.r[4]), "r"(b.r[5]),     \
                 "r"(b.r[6]), "r"(b.r[7]))

// acc += a · b with b column-major (S = Q·Kᵀ).
__device__ __forceinline__ void attn_mma_col(AttnAcc& acc, const AttnFrag& a, const AttnFrag& b) { ONECAT_WMMA_MMA("row.col"); }
// acc += a · b with b row-major (O = P·V).
__device__ __forceinline__ void attn_mma_row(AttnAcc& acc, const AttnFrag& a, const AttnFrag& b) { ONECAT_WMMA_MMA("row.row"); }

#undef ONECAT_WMMA_MMA

// 16×16 fp32 row-major with stride ld floats; shared or global memory, 32-byte aligned.
__device__ __forceinline__ void attn_store_acc(float* d, int ld, const AttnAcc& acc) {
  asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8}, %9;" ::"l"(d),
               "f"(acc.v[0]), "f"(acc.v[1]), "f"(acc.v[2]), "f"(acc.v[3]), "f"(acc.v[4]), "f"(acc.v[5]),
               "f"(acc.v[6]), "f"(acc.v[7]), "r"(ld)
               : "memory");
}

__device__ __forceinline__ void attn_load_acc(AttnAcc& acc, const float* c, int ld) {
  asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=f"(acc.v[0]), "=f"(acc.v[1]), "=f"(acc.v[2]), "=f"(acc.v[3]), "=f"(acc.v[4]), "=f"(acc.v[5]),
                 "=f"(acc.v[6]), "=f"(acc.v[7])
               : "l"(c), "r"(ld)
               : "memory");
}

// The row (0..15) of each of this lane's accumulator elements: a 16×16 matrix holding its
// row numbers is loaded as an accumulator through `scratch` (16 rows of ld ≥ 16 floats,
// the warp's own). Lets a warp scale accumulator rows without knowing the layout.
__device__ __forceinline__ void wmma_rows(int (&row)[8], float* scratch, int ld) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = lane; i < 256; i += 32) scratch[(i / 16) * ld + i % 16] = float(i / 16);
  __syncwarp();
  AttnAcc a;
  attn_load_acc(a, scratch, ld);
#pragma unroll
  for (int e = 0; e < 8; ++e) row[e] = int(a.v[e]);
  __syncwarp();
}

}  // namespace onecat
