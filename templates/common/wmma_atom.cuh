// The WMMA m16n16k16 atom (fp16 in, fp32 accumulate), written in PTX: on sm_70 each mma is
// Volta's HMMA.884 sequence, on sm_80+ HMMA.16816. The gemm mma strategy (gemm/mma.cuh) and
// attention's WMMA kernel (attention/attention.cuh) are written over it. Fragment layouts
// are the instruction's business (opaque): a kernel that needs the row of an accumulator
// element asks once (acc_rows). Operands are 16×16 tiles in shared or global memory with a
// stride `ld` in elements; wmma.load/store want each tile row 32-byte aligned.
#pragma once
#include "common/fp16.cuh"

namespace onecat::wmma {

struct Frag {
  unsigned r[8];  // 16 fp16 values of an A or B tile
};

struct Acc {
  float v[8];  // 8 fp32 values of a 16×16 accumulator tile
};

// How B's 16×16 tile lies in memory: kCol has element (k, n) at n·ld + k (weight rows or K
// rows, k contiguous), kRow at k·ld + n (V rows, n contiguous).
enum class Layout { kRow, kCol };

#define ONECAT_WMMA_FRAG_OUT(f) \
  "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]), "=r"(f.r[6]), "=r"(f.r[7])

// A: 16×16 row-major.
__device__ __forceinline__ void load_a(Frag& f, const half_t* a, int ld) {
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : ONECAT_WMMA_FRAG_OUT(f)
               : "l"(a), "r"(ld));
}

template <Layout B>
__device__ __forceinline__ void load_b(Frag& f, const half_t* b, int ld) {
  if constexpr (B == Layout::kCol) {
    asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
                 : ONECAT_WMMA_FRAG_OUT(f)
                 : "l"(b), "r"(ld));
  } else {
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
                 : ONECAT_WMMA_FRAG_OUT(f)
                 : "l"(b), "r"(ld));
  }
}

#undef ONECAT_WMMA_FRAG_OUT

#define ONECAT_WMMA_MMA(LAYOUT)                                                                                  \
  asm volatile("wmma.mma.sync.aligned." LAYOUT                                                                   \
               ".m16n16k16.f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "                                                  \
               "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, {%0,%1,%2,%3,%4,%5,%6,%7};"  \
               : "+f"(acc.v[0]), "+f"(acc.v[1]), "+f"(acc.v[2]), "+f"(acc.v[3]), "+f"(acc.v[4]), "+f"(acc.v[5]), \
                 "+f"(acc.v[6]), "+f"(acc.v[7])                                                                  \
               : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(a.r[4]), "r"(a.r[5]), "r"(a.r[6]),      \
                 "r"(a.r[7]), "r"(b.r[0]), "r"(b.r[1]), "r"(b.r[2]), "r"(b.r[3]), "r"(b.r[4]), "r"(b.r[5]),      \
                 "r"(b.r[6]), "r"(b.r[7]))

// acc += a · b, b loaded with load_b<B>.
template <Layout B>
__device__ __forceinline__ void mma(Acc& acc, const Frag& a, const Frag& b) {
  if constexpr (B == Layout::kCol) {
    ONECAT_WMMA_MMA("row.col");
  } else {
    ONECAT_WMMA_MMA("row.row");
  }
}

#undef ONECAT_WMMA_MMA

__device__ __forceinline__ void zero(Acc& acc) {
#pragma unroll
  for (int e = 0; e < 8; ++e) acc.v[e] = 0.f;
}

// Accumulator tile → 16×16 fp32 row-major at d.
__device__ __forceinline__ void store_acc(float* d, int ld, const Acc& acc) {
  asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8}, %9;" ::"l"(d),
               "f"(acc.v[0]), "f"(acc.v[1]), "f"(acc.v[2]), "f"(acc.v[3]), "f"(acc.v[4]), "f"(acc.v[5]), "f"(acc.v[6]),
               "f"(acc.v[7]), "r"(ld)
               : "memory");
}

// 16×16 fp32 row-major at c → accumulator tile.
__device__ __forceinline__ void load_acc(Acc& acc, const float* c, int ld) {
  asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=f"(acc.v[0]), "=f"(acc.v[1]), "=f"(acc.v[2]), "=f"(acc.v[3]), "=f"(acc.v[4]), "=f"(acc.v[5]),
                 "=f"(acc.v[6]), "=f"(acc.v[7])
               : "l"(c), "r"(ld)
               : "memory");
}

// The lane → row map: the row (0..15) of each of this lane's accumulator elements. A 16×16
// tile holding its row numbers goes through `scratch` (16 rows of ld ≥ 16 floats, the warp's
// own) into an accumulator. Lets a warp scale accumulator rows without knowing the layout.
__device__ __forceinline__ void acc_rows(int (&row)[8], float* scratch, int ld) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = lane; i < 256; i += 32) scratch[(i / 16) * ld + i % 16] = float(i / 16);
  __syncwarp();
  Acc a;
  load_acc(a, scratch, ld);
#pragma unroll
  for (int e = 0; e < 8; ++e) row[e] = int(a.v[e]);
  __syncwarp();
}

}  // namespace onecat::wmma
