// kv_write: new K/V rows into their pages. Token i's rows go to slot slot_mapping[i]
// (page = slot / PAGE, row = slot % PAGE; a negative slot skips the token, as padding).
// One thread moves 8 values of one (token, KV head): a 16-byte load of each of k and v and a
// 16-byte (fp16) or 8-byte (fp8, quantised with value / scale) store of each.
// Cache layout: [pages][KVH][PAGE][D] for K and for V.
#pragma once
#include "attention/kv_format.cuh"
#include "common/fp16.cuh"
#include "common/gmem.cuh"

namespace onecat {

template <int KVH, int D, int PAGE, int KV, bool SCALE_PER_HEAD, int THREADS>
__global__ void __launch_bounds__(THREADS)
    kv_write_kernel(void* __restrict__ k_cache, void* __restrict__ v_cache, const half_t* __restrict__ k,
                    const half_t* __restrict__ v, const int* __restrict__ slot_mapping,
                    const float* __restrict__ k_scale, const float* __restrict__ v_scale, int tokens) {
  constexpr int kParts = D / 8;
  const long long c = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (c >= (long long)tokens * KVH * kParts) return;
  const int token = int(c / (KVH * kParts));
  const int kvh = int(c / kParts % KVH), part = int(c % kParts);
  const int slot = slot_mapping[token];
  if (slot < 0) return;
  const long long src = c * 8;
  const long long dst = (((long long)(slot / PAGE) * KVH + kvh) * PAGE + slot % PAGE) * D + part * 8;
  const Chunk<16> kc = gmem_load_nc<16>(k + src), vc = gmem_load_nc<16>(v + src);
  if constexpr (KV == kKvF16) {
    gmem_store<16>(static_cast<half_t*>(k_cache) + dst, kc);
    gmem_store<16>(static_cast<half_t*>(v_cache) + dst, vc);
  } else {
    const float ks = k_scale[SCALE_PER_HEAD ? kvh : 0], vs = v_scale[SCALE_PER_HEAD ? kvh : 0];
    Chunk<8> kq, vq;
    unsigned char* kb = reinterpret_cast<unsigned char*>(kq.h);
    unsigned char* vb = reinterpret_cast<unsigned char*>(vq.h);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      kb[e] = (unsigned char)fp8_encode<KV>(half_to_float(half_t{kc.h[e]}) / ks);
      vb[e] = (unsigned char)fp8_encode<KV>(half_to_float(half_t{vc.h[e]}) / vs);
    }
    gmem_store<8>(static_cast<unsigned char*>(k_cache) + dst, kq);
    gmem_store<8>(static_cast<unsigned char*>(v_cache) + dst, vq);
  }
}

}  // namespace onecat
