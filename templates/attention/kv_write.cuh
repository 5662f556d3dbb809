// kv_write: new K/V rows into their pages. Token i's rows go to slot slot_mapping[i]
// (page = slot / PAGE, row = slot % PAGE; a negative slot skips the token, as padding).
// One thread moves 8 values of one (token, KV head): a 16-byte load of each of k and v and a
// 16-byte (fp16) or 8-byte (fp8, quantised with value / scale) store of each.
// Cache layout: [pages][KVH][PAGE][D] for K and for V. kv_cache_offset and kv_store are also
// how rope (kv_out=pages) writes its K and V, so both write the same bytes.
#pragma once
#include "attention/kv_format.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"

namespace onecat {

// Element offset of element 0 of KV head kvh's row for `slot` in a [pages][KVH][PAGE][D] cache.
template <int KVH, int D, int PAGE>
__device__ __forceinline__ long long kv_cache_offset(int slot, int kvh) {
  return (((long long)(slot / PAGE) * KVH + kvh) * PAGE + slot % PAGE) * D;
}

// N fp16 values (one 2N-byte chunk) into a cache at element offset `at`: as they are (fp16), or
// as the fp8 codes of value / scale (N bytes).
template <int KV, int N>
__device__ __forceinline__ void kv_store(void* cache, long long at, const Chunk<2 * N>& values, float scale) {
  if constexpr (KV == kKvF16) {
    gmem_store<2 * N>(static_cast<half_t*>(cache) + at, values);
  } else {
    Chunk<N> codes;
    unsigned char* b = reinterpret_cast<unsigned char*>(codes.h);
    // Every quotient before the first code: an IEEE division has a slow-path call, and with
    // the encodes between the calls ptxas kept a value in local memory across them (rope's
    // 16-head fp8 default on sm_90). The arithmetic is the same either way.
    float q[N];
#pragma unroll
    for (int e = 0; e < N; ++e) q[e] = half_to_float(half_t{values.h[e]}) / scale;
#pragma unroll
    for (int e = 0; e < N; ++e) b[e] = (unsigned char)fp8_encode<KV>(q[e]);
    gmem_store<N>(static_cast<unsigned char*>(cache) + at, codes);
  }
}

template <int KVH, int D, int PAGE, int KV, bool SCALE_PER_HEAD, int THREADS>
__global__ void __launch_bounds__(THREADS)
    kv_write_kernel(void* __restrict__ k_cache, void* __restrict__ v_cache, const half_t* __restrict__ k,
                    const half_t* __restrict__ v, const int* __restrict__ slot_mapping,
                    const float* __restrict__ k_scale, const float* __restrict__ v_scale, int tokens) {
  grid_dependency_sync();
  constexpr int kParts = D / 8;
  const long long c = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (c >= (long long)tokens * KVH * kParts) return;
  const int token = int(c / (KVH * kParts));
  const int kvh = int(c / kParts % KVH), part = int(c % kParts);
  const int slot = slot_mapping[token];
  if (slot < 0) return;
  const long long src = c * 8;
  const long long dst = kv_cache_offset<KVH, D, PAGE>(slot, kvh) + part * 8;
  const Chunk<16> kc = gmem_load_nc<16>(k + src), vc = gmem_load_nc<16>(v + src);
  float ks = 1.f, vs = 1.f;
  if constexpr (KV != kKvF16) {
    ks = k_scale[SCALE_PER_HEAD ? kvh : 0];
    vs = v_scale[SCALE_PER_HEAD ? kvh : 0];
  }
  kv_store<KV, 8>(k_cache, dst, kc, ks);
  kv_store<KV, 8>(v_cache, dst, vc, vs);
}

}  // namespace onecat
