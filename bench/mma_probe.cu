// What mma.sync.m16n8k16 can reach on this GPU as a function of warps per SM and of the
// warp tile, with fragments fed by ldmatrix from shared memory and with a CTA barrier every
// few k16 slices — the ceilings the gemm mma pipelines (templates/gemm/mma16816_swizzled.cuh) work
// under, without their global loads. Standalone (nvcc -O3 -arch=sm_90 mma_probe.cu);
// prints one JSON object per line: kernel, warp tile, warps per SM, TFLOP/s.
//   pure   FM·FN independent accumulators per warp, fragments fixed in registers
//   fed    the same, fragments of each k16 slice from ldmatrix.x4 (double-buffered)
//   sync   fed plus __syncthreads every SYNC k16 slices (bk = 16·SYNC)
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// FM m16 tiles × FN n8 tiles per warp (FN even: one ldmatrix.x4 per n16 pair).
// MODE 0 pure, 1 fed, 2 fed + barrier every SYNC slices.
template <int FM, int FN, int MODE, int SYNC>
__global__ void probe(float* out, int iters, unsigned seed) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < 32768 / 4; i += blockDim.x) reinterpret_cast<unsigned*>(smem)[i] = seed * (i + 1);
  __syncthreads();
  float acc[FM][FN][4] = {};
  unsigned a[2][FM][4], b[2][FN / 2][4];
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // Swizzled 128-byte rows: lane's row lane%16, chunk lane/16 (A) or (lane/8)%2 (B).
  const unsigned a_lane = base + (lane % 16) * 128 + (((lane / 16) ^ (lane % 8)) << 4);
  const unsigned b_lane = base + 16384 + (lane % 8 + (lane / 16) * 8) * 128 + ((((lane / 8) % 2) ^ (lane % 8)) << 4);
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) a[0][i][e] = a[1][i][e] = seed + i * 4 + e + lane;
#pragma unroll
  for (int j = 0; j < FN / 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) b[0][j][e] = b[1][j][e] = seed * 3 + j * 4 + e + lane;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int s = 0; s < 4; ++s) {  // four k16 slices per iteration
      const int cur = s % 2, nxt = (s + 1) % 2;
      if constexpr (MODE >= 1) {
        const unsigned kofs = (((s + 1) % 4) * 32) ^ 0;  // next slice's chunk pair
#pragma unroll
        for (int i = 0; i < FM; ++i) ldsm4(a[nxt][i], a_lane + i * 2048 + kofs);
#pragma unroll
        for (int j = 0; j < FN / 2; ++j) ldsm4(b[nxt][j], b_lane + j * 2048 + kofs);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN / 2; ++j) {
          mma(acc[i][2 * j], a[cur][i], b[cur][j][0], b[cur][j][1]);
          mma(acc[i][2 * j + 1], a[cur][i], b[cur][j][2], b[cur][j][3]);
        }
      if constexpr (MODE == 2) {
        if ((s + 1) % SYNC == 0) __syncthreads();
      }
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sum += acc[i][j][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

template <int FM, int FN, int MODE, int SYNC>
void run(const char* name, int warps, int sms, float* out) {
  auto k = probe<FM, FN, MODE, SYNC>;
  const int smem = 120 * 1024;  // one CTA per SM: warps per SM = warps per CTA
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, k));
  if (attr.numRegs * warps * 32 > 65536) {
    std::printf("{\"kernel\": \"%s\", \"warp_tile\": \"%dx%d\", \"warps_per_sm\": %d, \"regs\": %d, \"skipped\": \"registers\"}\n",
                name, FM * 16, FN * 8, warps, attr.numRegs);
    return;
  }
  const int iters = 4096;
  k<<<sms, warps * 32, smem>>>(out, 16, 1);
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    CHECK(cudaEventRecord(e0));
    k<<<sms, warps * 32, smem>>>(out, iters, 1u + r);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best) best = ms;
  }
  const double flops = 4096.0 * FM * FN * 4 * double(iters) * warps * sms;
  std::printf("{\"kernel\": \"%s\", \"warp_tile\": \"%dx%d\", \"warps_per_sm\": %d, \"sync_slices\": %d, \"regs\": %d, \"local_bytes\": %zu, \"tflops\": %.1f}\n",
              name, FM * 16, FN * 8, warps, MODE == 2 ? SYNC : 0, attr.numRegs, attr.localSizeBytes, flops / (best * 1e-3) / 1e12);
  std::fflush(stdout);
}

template <int FM, int FN>
void tile(int sms, float* out) {
  for (int w : {4, 8, 12, 16}) {
    run<FM, FN, 0, 1>("pure", w, sms, out);
    run<FM, FN, 1, 1>("fed", w, sms, out);
    run<FM, FN, 2, 2>("sync", w, sms, out);
    run<FM, FN, 2, 4>("sync", w, sms, out);
  }
}

int main() {
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out;
  CHECK(cudaMalloc(&out, size_t(sms) * 1024 * sizeof(float)));
  tile<4, 8>(sms, out);   // 64×64
  tile<4, 4>(sms, out);   // 64×32
  tile<2, 8>(sms, out);   // 32×64
  tile<2, 4>(sms, out);   // 32×32
  return 0;
}
