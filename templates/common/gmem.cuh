// Global-memory moves of 2, 4, 8 or 16 bytes as one instruction each: the widths are
// spelled out in PTX so the ptxas report and the PTX show exactly what a kernel loads.
#pragma once

namespace onecat {

// BYTES bytes of registers, moved whole.
template <int BYTES>
struct alignas(BYTES) Chunk {
  static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "chunk width");
  unsigned short h[BYTES / 2];
};

// Read-only path (ld.global.nc): for inputs that no thread of the launch writes.
template <int BYTES>
__device__ __forceinline__ Chunk<BYTES> gmem_load_nc(const void* ptr) {
  Chunk<BYTES> c;
  if constexpr (BYTES == 16) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(ptr));
  } else if constexpr (BYTES == 8) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(ptr));
  } else if constexpr (BYTES == 4) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(w[0]) : "l"(ptr));
  } else {
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(c.h[0]) : "l"(ptr));
  }
  return c;
}

// Coherent path: for buffers the same launch also writes (an in-place residual).
template <int BYTES>
__device__ __forceinline__ Chunk<BYTES> gmem_load(const void* ptr) {
  Chunk<BYTES> c;
  if constexpr (BYTES == 16) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(ptr));
  } else if constexpr (BYTES == 8) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(ptr));
  } else if constexpr (BYTES == 4) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(w[0]) : "l"(ptr));
  } else {
    asm volatile("ld.global.u16 %0, [%1];" : "=h"(c.h[0]) : "l"(ptr));
  }
  return c;
}

// Through L2 only (ld.global.cg): for what other CTAs of the same launch wrote and published
// (an acquire of their flag orders the load after their stores; L1 may hold an older copy).
template <int BYTES>
__device__ __forceinline__ Chunk<BYTES> gmem_load_cg(const void* ptr) {
  Chunk<BYTES> c;
  if constexpr (BYTES == 16) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(ptr));
  } else if constexpr (BYTES == 8) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.cg.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(ptr));
  } else if constexpr (BYTES == 4) {
    unsigned* w = reinterpret_cast<unsigned*>(c.h);
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(w[0]) : "l"(ptr));
  } else {
    asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(c.h[0]) : "l"(ptr));
  }
  return c;
}

template <int BYTES>
__device__ __forceinline__ void gmem_store(void* ptr, const Chunk<BYTES>& c) {
  if constexpr (BYTES == 16) {
    const unsigned* w = reinterpret_cast<const unsigned*>(c.h);
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(ptr), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  } else if constexpr (BYTES == 8) {
    const unsigned* w = reinterpret_cast<const unsigned*>(c.h);
    asm volatile("st.global.v2.u32 [%0], {%1,%2};" ::"l"(ptr), "r"(w[0]), "r"(w[1]) : "memory");
  } else if constexpr (BYTES == 4) {
    const unsigned* w = reinterpret_cast<const unsigned*>(c.h);
    asm volatile("st.global.u32 [%0], %1;" ::"l"(ptr), "r"(w[0]) : "memory");
  } else {
    asm volatile("st.global.u16 [%0], %1;" ::"l"(ptr), "h"(c.h[0]) : "memory");
  }
}

}  // namespace onecat
