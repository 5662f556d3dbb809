// What the two pipelines of the m16n8k16 mma strategy (pipe=1 mma16816_padded.cuh, pipe=2
// mma16816_swizzled.cuh) share outside their math: each K step's cp.async loads of the x tile and
// the raw weight tile, the next step's scales, and the decode of a raw weight stage into an
// fp16 tile. Where a chunk lands in shared memory is the pipeline's own layout (padded rows
// for pipe=1, swizzled rows for pipe=2), passed in as a function of (row, 16-byte chunk).
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/sm80.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/formats.cuh"

namespace onecat {

__device__ __forceinline__ unsigned shared_address(const void* p) { return sm80::smem_address(p); }

template <class Fmt>
struct IsF16Format {
  static constexpr bool value = false;
};
template <>
struct IsF16Format<FmtF16> {
  static constexpr bool value = true;
};

// A CTA of THREADS threads: x rows m0.. (BM tokens) and weight rows from output column n0
// (BN rows, tile_weight_row) in K steps of BK.
template <class Fmt, int N, int K, int BM, int BN, int BK, int THREADS, int EPI, bool ACT_ORDER>
struct Mma16816Loads {
  static constexpr int kPer = Fmt::kPerChunk;
  static constexpr int kChunksPerRow = K / kPer;
  static constexpr int kChunksPerStep = BK / kPer;  // per weight row
  static constexpr int kXLoads = BM * BK / 8;
  static constexpr int kWLoads = BN * kChunksPerStep;
  static constexpr int kDecodePerThread = IsF16Format<Fmt>::value ? 1 : (kWLoads + THREADS - 1) / THREADS;
  using Scale = typename Fmt::Scale;

  // Step kt's x tile by cp.async, zero-filled past token m; act-order gathers the permuted
  // columns through registers. xdst(r, c): the half_t* of chunk c (8 halves) of row r.
  template <class XDst>
  __device__ static __forceinline__ void x_step(const half_t* __restrict__ x, const int* __restrict__ perm, int m,
                                                int m0, int kt, int tid, XDst xdst) {
#pragma unroll
    for (int i = 0; i < (kXLoads + THREADS - 1) / THREADS; ++i) {
      const int idx = tid + i * THREADS;
      if (kXLoads % THREADS == 0 || idx < kXLoads) {
        const int r = idx / (BK / 8), c = idx % (BK / 8);
        const bool in = m0 + r < m;
        const half_t* row = x + static_cast<long long>(in ? m0 + r : 0) * K;
        half_t* dst = xdst(r, c);
        if constexpr (ACT_ORDER) {
          Raw16 v{};
          if (in) {
#pragma unroll
            for (int j = 0; j < 8; ++j) v.h[j] = row[perm[kt * BK + c * 8 + j]].bits;
          }
          *reinterpret_cast<Raw16*>(dst) = v;
        } else {
          sm80::cp_async16(shared_address(dst), row + kt * BK + c * 8, in ? 16 : 0);
        }
      }
    }
  }

  // Step kt's raw weight chunks by cp.async. wdst(r, c): the shared address of chunk c of
  // weight row r of the stage.
  template <class WDst>
  __device__ static __forceinline__ void weight_step(const void* __restrict__ qweight, int n0, int kt, int tid,
                                                     WDst wdst) {
#pragma unroll
    for (int i = 0; i < (kWLoads + THREADS - 1) / THREADS; ++i) {
      const int idx = tid + i * THREADS;
      if (kWLoads % THREADS == 0 || idx < kWLoads) {
        const int r = idx / kChunksPerStep, c = idx % kChunksPerStep;
        const char* src =
            static_cast<const char*>(qweight) +
            (static_cast<long long>(tile_weight_row<N, EPI>(n0, r)) * kChunksPerRow + kt * kChunksPerStep + c) * 16;
        sm80::cp_async16(wdst(r, c), src, 16);
      }
    }
  }

  // The scales of the chunks this thread decodes in step kt (decoded formats only).
  __device__ static __forceinline__ void scales_step(Scale (&sc)[kDecodePerThread], const void* __restrict__ scales,
                                                     const void* __restrict__ zeros, int n0, int kt, int tid) {
    if constexpr (!IsF16Format<Fmt>::value) {
#pragma unroll
      for (int i = 0; i < kDecodePerThread; ++i) {
        const int idx = tid + i * THREADS;
        if (kWLoads % THREADS == 0 || idx < kWLoads) {
          sc[i] = Fmt::load_scale(scales, zeros, tile_weight_row<N, EPI>(n0, idx / kChunksPerStep),
                                  kt * kChunksPerStep + idx % kChunksPerStep);
        }
      }
    }
  }

  // Raw stage `stage` (BN rows of kChunksPerStep 16-byte chunks each, from raw) decoded to
  // fp16 with the scales of scales_step. ddst(r, c8): the half_t* of the 8-half chunk c8 of
  // row r of the fp16 tile.
  template <class DDst>
  __device__ static __forceinline__ void decode_stage(const Scale (&sc)[kDecodePerThread], const unsigned char* raw,
                                                      int stage, int tid, DDst ddst) {
#pragma unroll
    for (int i = 0; i < kDecodePerThread; ++i) {
      const Raw16 v = read_raw(raw, stage, tid, i);
      decode_store(v, sc[i], tid, i, ddst);
    }
  }

  // decode_stage in two halves, so a pipeline can put other work between a chunk's shared
  // load and its use: read_raw returns this thread's chunk i of the raw stage, decode_store
  // decodes it and writes the fp16 tile.
  __device__ static __forceinline__ Raw16 read_raw(const unsigned char* raw, int stage, int tid, int i) {
    const int idx = tid + i * THREADS;
    Raw16 v{};
    if (kWLoads % THREADS == 0 || idx < kWLoads) {
      v = *reinterpret_cast<const Raw16*>(raw + ((stage * BN + idx / kChunksPerStep) * kChunksPerStep + idx % kChunksPerStep) * 16);
    }
    return v;
  }
  template <class DDst>
  __device__ static __forceinline__ void decode_store(const Raw16& v, const Scale& sc, int tid, int i, DDst ddst) {
    const int idx = tid + i * THREADS;
    if (kWLoads % THREADS == 0 || idx < kWLoads) {
      const int r = idx / kChunksPerStep, c = idx % kChunksPerStep;
      half2_t d[kPer / 2];
      decode_chunk_full<Fmt>(v, sc, d);
#pragma unroll
      for (int p = 0; p < kPer / 8; ++p) {
        Raw16 o;
#pragma unroll
        for (int j = 0; j < 4; ++j) reinterpret_cast<unsigned*>(o.h)[j] = d[p * 4 + j].bits;
        *reinterpret_cast<Raw16*>(ddst(r, c * (kPer / 8) + p)) = o;
      }
    }
  }
};

}  // namespace onecat
