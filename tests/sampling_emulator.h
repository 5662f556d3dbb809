// Runs the sampling family's kernel bodies (templates/sampling) on the CPU: one std::thread
// per CUDA thread, __syncthreads as a std::barrier, shared-memory and global atomics as
// std::atomic_ref, the fp32 intrinsics as plain IEEE operations. The bodies use nothing
// else (no warp intrinsics), so their logic — the selections, the ordered passes, the hash
// table, the split argmax — is tested here without a GPU. Include this before the templates.
#pragma once
#include <math.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#define ONECAT_EMULATED_CTA 1

namespace onecat::emulated {
struct Dim {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local Dim thread_index, block_index;
inline std::barrier<>* cta_barrier = nullptr;

// Runs body() as grid_x × grid_y CTAs of `threads` threads, one CTA at a time, calling
// before_cta() before each (e.g. to fill shared memory with garbage).
template <class Before, class Body>
void run_grid(unsigned grid_x, unsigned grid_y, unsigned threads, Before before_cta, Body body) {
  for (unsigned by = 0; by < grid_y; ++by) {
    for (unsigned bx = 0; bx < grid_x; ++bx) {
      before_cta();
      std::barrier<> barrier(threads);
      cta_barrier = &barrier;
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          thread_index = {t, 0, 0};
          block_index = {bx, by, 0};
          body();
        });
      }
      for (auto& th : pool) th.join();
    }
  }
}
}  // namespace onecat::emulated

#define threadIdx (::onecat::emulated::thread_index)
#define blockIdx (::onecat::emulated::block_index)
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct float4 {
  float x, y, z, w;
};

inline void __syncthreads() { onecat::emulated::cta_barrier->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <class T>
T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <class T>
T atomicExch(T* p, T v) {
  return std::atomic_ref<T>(*p).exchange(v);
}
inline unsigned atomicOr(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_or(v); }
inline int atomicCAS(int* p, int expected, int desired) {
  std::atomic_ref<int>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) { return __uint_as_float(unsigned(i)); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __uint2float_rn(unsigned u) { return float(u); }
// The GPU's fast division is within 2 ulp; the emulator errs by exactly 2, up, so code that
// relies on it being close but not exact is tested at its worst.
inline float __fdividef(float a, float b) { return std::nextafter(std::nextafter(a / b, HUGE_VALF), HUGE_VALF); }
inline double __longlong_as_double(long long v) {
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}
inline float __double2float_rn(double d) { return float(d); }
inline unsigned long long __float2ull_rn(float f) { return static_cast<unsigned long long>(std::nearbyint(f)); }
template <class T>
T __ldg(const T* p) {
  return *p;
}
template <class T>
T __ldcg(const T* p) {
  return std::atomic_ref<T>(*const_cast<T*>(p)).load();
}
// expf, logf, fma and ceil are <math.h>'s.
