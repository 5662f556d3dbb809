// Weight formats as the gemm kernels read them (layouts: docs/gemm.md). Each format reads
// one 16-byte chunk of a weight row per load and turns it into fp16 pairs:
//   kPerChunk          k values per 16-byte chunk
//   Scale load_scale(scales, zeros, row, chunk)   what the chunk's decode needs
//   prefetch_scale(scales, zeros, row, chunk)      asks L2 for what load_scale will read
//                       (before a kernel's wait for the one before it: common/grid.cuh)
//   half2_t decode(raw, pair, scale)   W[row][k0 + 2p], W[row][k0 + 2p + 1], scaled where fp16 is exact
//   float flush(scale)  the factor applied in fp32 to the chunk's fp16 partial sum
//   kFlushScaled        false when flush() is always 1
//   kWordScaled         decode = decode_unscaled · word_scale(scale): gemv sums each word's
//                       (4 pairs') unscaled products and scales that partial once
//   kScaleSpanK         k values over which a row's Scale is the same (0: none to exploit);
//                       then decode = decode_unscaled · block_scale(scale) with an fp32
//                       block_scale, which tc_small applies to a k-block's fp32 partial sums
// Decoding happens in registers (no shared memory), as Volta's best GEMV kernels do.
#pragma once
#include "common/fp16.cuh"
#include "common/gmem.cuh"
#include "common/grid.cuh"

namespace onecat {

using Raw16 = Chunk<16>;

__device__ __forceinline__ unsigned raw_word(const Raw16& raw, int i) { return reinterpret_cast<const unsigned*>(raw.h)[i]; }

__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned selector) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// (a & MASK) | BITS as one lop3. Written out because ptxas does not merge a PTX and + or whose
// two constants are both immediates (a LOP3 encodes one): it issued two LOP3s per int4 pair.
template <unsigned MASK, unsigned BITS>
__device__ __forceinline__ unsigned and_or(unsigned a) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "n"(MASK), "n"(BITS));
  return d;
}

// Two E4M3 bytes (k, k+1) of a word → fp16 pair of value·2^-8 (exact): the byte's sign goes
// to bit 15 and its 7 magnitude bits to bits 13..7 (VOLTA.md, integer decode). Three
// instructions: the prmt puts byte 2i in the low byte of the low half and its sign, replicated
// by prmt's sign mode (selector bit 3), in the high byte (byte 2i+1 likewise in the high half);
// a shift left by 7 brings the magnitude to bits 13..7 and the sign to bit 15, and one AND
// clears the rest (the two-mask AND/OR of a sign kept in place took two LOP3s).
template <int PAIR_IN_WORD>
__device__ __forceinline__ half2_t e4m3x2_to_half2_scaled(unsigned word) {
  const unsigned t = prmt(word, 0u, PAIR_IN_WORD == 0 ? 0x9180u : 0xB3A2u);
  return half2_t{(t << 7) & 0xbf80bf80u};
}

// Two E2M1 codes at bits SHIFT and SHIFT+16 → fp16 pair of value·2^-14 (exact): the 3
// magnitude bits land on fp16's low exponent bits and top mantissa bit, the sign on bit 15.
template <int SHIFT>
__device__ __forceinline__ half2_t e2m1x2_to_half2_scaled(unsigned word) {
  const unsigned u = word >> SHIFT;
  return half2_t{((u << 9) & 0x0e000e00u) | ((u << 12) & 0x80008000u)};
}

struct FmtF16 {
  static constexpr bool kWordScaled = false;
  static constexpr int kScaleSpanK = 0;
  static constexpr int kPerChunk = 8;
  static constexpr bool kFlushScaled = false;
  struct Scale {};
  __device__ static Scale load_scale(const void*, const void*, int, int) { return {}; }
  __device__ static void prefetch_scale(const void*, const void*, int, int) {}
  __device__ static half2_t decode(const Raw16& raw, int p, const Scale&) { return half2_t{raw_word(raw, p)}; }
  __device__ static float flush(const Scale&) { return 1.f; }
};

// awq4 and gptq4: (q - z) * s per group of GROUP along K. One AND-OR (a single lop3) per pair,
// one shift per word, and in gemv one scale multiply per word (decode_unscaled + word_scale).
template <int K, int GROUP>
struct FmtInt4 {
  static constexpr int kPerChunk = 32;
  static constexpr bool kFlushScaled = false;
  static constexpr bool kWordScaled = true;  // decode_unscaled + word_scale (gemv)
  static constexpr int kScaleSpanK = GROUP;
  static_assert(GROUP % kPerChunk == 0, "a chunk must lie in one group");
  struct Scale {
    half2_t s2;
    half2_t z2;   // 1024 + z in both halves (codes in the low nibble of a byte)
    half2_t zh2;  // -(64 + z) in both halves (codes in the high nibble)
  };
  __device__ static long long scale_index(int row, int chunk) {
    return static_cast<long long>(row) * (K / GROUP) + chunk * kPerChunk / GROUP;
  }
  __device__ static void prefetch_scale(const void* scales, const void* zeros, int row, int chunk) {
    grid_dependency_prefetch_l2(static_cast<const half_t*>(scales) + scale_index(row, chunk));
    grid_dependency_prefetch_l2(static_cast<const half_t*>(zeros) + scale_index(row, chunk));
  }
  __device__ static Scale load_scale(const void* scales, const void* zeros, int row, int chunk) {
    const long long i = scale_index(row, chunk);
    const half_t s = static_cast<const half_t*>(scales)[i];
    const half2_t z = half2_splat(static_cast<const half_t*>(zeros)[i]);
    // 1024 + z and -64 - z in fp16 with one rounding each (one FMA), as fp32 then fp16 would round.
    return {half2_splat(s), hfma2(z, half2_t{0x3c003c00u} /* 1 */, half2_t{0x64006400u} /* 1024 */),
            hfma2(z, half2_t{0xbc00bc00u} /* -1 */, half2_t{0xd400d400u} /* -64 */)};
  }
  // q - z, exact. Codes of k = 2i, 2i+1 sit at bits 4i and 16 + 4i (interleaved order). One
  // AND-OR (a single lop3) puts a pair into the mantissa of 0x6400 (1024.0): codes at bits
  // 0/16 give 1024 + q and codes at bits 4/20 give 1024 + 16q, so a word needs one shift (by
  // 8) for its four pairs; (1024 + q) − (1024 + z) and (1024 + 16q)/16 − (64 + z) are exact.
  __device__ static half2_t decode_unscaled(const Raw16& raw, int p, const Scale& sc) {
    const unsigned w = raw_word(raw, p / 4);
    const unsigned v = p % 4 >= 2 ? w >> 8 : w;
    if (p % 2 == 0) return hsub2(half2_t{and_or<0x000f000fu, 0x64006400u>(v)}, sc.z2);
    return hfma2(half2_t{and_or<0x00f000f0u, 0x64006400u>(v)}, half2_t{0x2c002c00u} /* 1/16 */, sc.zh2);
  }
  __device__ static half2_t word_scale(const Scale& sc) { return sc.s2; }
  __device__ static float block_scale(const Scale& sc) { return half_to_float(half_t{static_cast<unsigned short>(sc.s2.bits)}); }
  __device__ static half2_t decode(const Raw16& raw, int p, const Scale& sc) { return hmul2(decode_unscaled(raw, p, sc), sc.s2); }
  __device__ static float flush(const Scale&) { return 1.f; }
};

// fp8b32: E4M3 with a power-of-two scale 2^e per 32×32 block, e in [-14, 7] (the packer
// guarantees it), so the scaled value is an exact fp16.
template <int K>
struct FmtFp8B32 {
  static constexpr bool kWordScaled = false;
  static constexpr int kScaleSpanK = 0;
  static constexpr int kPerChunk = 16;
  static constexpr bool kFlushScaled = false;
  struct Scale {
    half2_t s2;  // 2^(e+8): undoes the decode's 2^-8
  };
  __device__ static int scale_index(int row, int chunk) { return (row / 32) * (K / 32) + chunk * kPerChunk / 32; }
  __device__ static void prefetch_scale(const void* scales, const void*, int row, int chunk) {
    grid_dependency_prefetch_l2(static_cast<const signed char*>(scales) + scale_index(row, chunk));
  }
  __device__ static Scale load_scale(const void* scales, const void*, int row, int chunk) {
    const int e = static_cast<const signed char*>(scales)[scale_index(row, chunk)];
    return {half2_splat(half_t{static_cast<unsigned short>((e + 8 + 15) << 10)})};
  }
  __device__ static half2_t decode(const Raw16& raw, int p, const Scale& sc) {
    const unsigned w = raw_word(raw, p / 2);
    return hmul2(p % 2 == 0 ? e4m3x2_to_half2_scaled<0>(w) : e4m3x2_to_half2_scaled<1>(w), sc.s2);
  }
  __device__ static float flush(const Scale&) { return 1.f; }
};

// fp8b128: E4M3 with an fp32 scale per 128×128 block (BLOCK=128) or per row (BLOCK=0).
template <int K, int BLOCK>
struct FmtFp8B128 {
  static constexpr bool kPow2Tile = false;
  static constexpr bool kWordScaled = false;
  static constexpr int kScaleSpanK = BLOCK == 0 ? (1 << 30) : BLOCK;  // per channel: all of K
  static constexpr int kPerChunk = 16;
  static constexpr bool kFlushScaled = true;
  static_assert(BLOCK == 0 || BLOCK % kPerChunk == 0, "a chunk must lie in one block");
  struct Scale {
    float s;
  };
  __device__ static int scale_index(int row, int chunk) {
    if constexpr (BLOCK == 0) {
      return row;
    } else {
      constexpr int kBlocksK = (K + BLOCK - 1) / BLOCK;
      return (row / BLOCK) * kBlocksK + chunk * kPerChunk / BLOCK;
    }
  }
  // Nothing: 128 rows (or all of K) share a scale, so every thread of a CTA would ask for the
  // same line, and on an H100 those repeated requests cost the gemv 4-41 % (tried and lost).
  __device__ static void prefetch_scale(const void*, const void*, int, int) {}
  __device__ static Scale load_scale(const void* scales, const void*, int row, int chunk) {
    return {static_cast<const float*>(scales)[scale_index(row, chunk)] * 256.f};
  }
  __device__ static half2_t decode(const Raw16& raw, int p, const Scale&) {
    const unsigned w = raw_word(raw, p / 2);
    return p % 2 == 0 ? e4m3x2_to_half2_scaled<0>(w) : e4m3x2_to_half2_scaled<1>(w);
  }
  __device__ static float flush(const Scale& sc) { return sc.s; }
  __device__ static half2_t decode_unscaled(const Raw16& raw, int p, const Scale& sc) { return decode(raw, p, sc); }
  __device__ static float block_scale(const Scale& sc) { return sc.s; }
};

// nvfp4: E2M1 with an E4M3 scale per 16 along K and an fp32 global scale (applied by the
// kernel's epilogue). decode = e2m1 · 2^-14 · (s · 2^6) = e2m1 · s · 2^-8, exact in fp16.
template <int K>
struct FmtNvfp4 {
  static constexpr bool kPow2Tile = false;
  static constexpr bool kWordScaled = false;
  static constexpr int kScaleSpanK = 0;
  static constexpr int kPerChunk = 32;
  static constexpr bool kFlushScaled = true;
  struct Scale {
    half2_t s2[2];  // the two groups of 16 in a chunk, each as s · 2^6
  };
  __device__ static long long scale_index(int row, int chunk) {
    return (static_cast<long long>(row) * (K / 16)) / 2 + chunk;
  }
  __device__ static void prefetch_scale(const void* scales, const void*, int row, int chunk) {
    grid_dependency_prefetch_l2(static_cast<const unsigned short*>(scales) + scale_index(row, chunk));
  }
  __device__ static Scale load_scale(const void* scales, const void*, int row, int chunk) {
    const unsigned short pair = static_cast<const unsigned short*>(scales)[scale_index(row, chunk)];
    const half2_t s = e4m3x2_to_half2_scaled<0>(pair);  // s · 2^-8, both groups
    const half2_t s6 = hmul2(s, half2_splat(half_t{0x7400}));  // · 2^14
    return {{half2_t{(s6.bits & 0xffffu) * 0x10001u}, half2_t{(s6.bits >> 16) * 0x10001u}}};
  }
  __device__ static half2_t decode(const Raw16& raw, int p, const Scale& sc) {
    const unsigned w = raw_word(raw, p / 4);
    half2_t v;
    switch (p % 4) {
      case 0: v = e2m1x2_to_half2_scaled<0>(w); break;
      case 1: v = e2m1x2_to_half2_scaled<4>(w); break;
      case 2: v = e2m1x2_to_half2_scaled<8>(w); break;
      default: v = e2m1x2_to_half2_scaled<12>(w); break;
    }
    return hmul2(v, sc.s2[p / 8]);
  }
  __device__ static float flush(const Scale&) { return 256.f; }
};

// mxfp4: E2M1 with a UE8M0 scale 2^(e-127) per 32 along K, applied in fp32 (its range
// exceeds fp16's) together with the 2^14 the decode leaves out.
template <int K>
struct FmtMxfp4 {
  // The fp16 tile (decode_chunk_full) takes the scale as two exact power-of-two steps: 2^(e-113)
  // itself overflows fp16 from e = 129 (a block scale of 4), although the weights fit.
  static constexpr bool kPow2Tile = true;
  static constexpr bool kWordScaled = false;
  static constexpr int kScaleSpanK = 0;
  static constexpr int kPerChunk = 32;
  static constexpr bool kFlushScaled = true;
  struct Scale {
    float s;
  };
  __device__ static long long scale_index(int row, int chunk) { return static_cast<long long>(row) * (K / 32) + chunk; }
  __device__ static void prefetch_scale(const void* scales, const void*, int row, int chunk) {
    grid_dependency_prefetch_l2(static_cast<const unsigned char*>(scales) + scale_index(row, chunk));
  }
  __device__ static Scale load_scale(const void* scales, const void*, int row, int chunk) {
    const int e = static_cast<const unsigned char*>(scales)[scale_index(row, chunk)];
    // 2^(e - 127 + 14) built as fp32 bits: biased exponent e + 14 (never subnormal; ≥ 255 is inf).
    return {__int_as_float(min(e + 14, 255) << 23)};
  }
  __device__ static half2_t decode(const Raw16& raw, int p, const Scale&) {
    const unsigned w = raw_word(raw, p / 4);
    switch (p % 4) {
      case 0: return e2m1x2_to_half2_scaled<0>(w);
      case 1: return e2m1x2_to_half2_scaled<4>(w);
      case 2: return e2m1x2_to_half2_scaled<8>(w);
      default: return e2m1x2_to_half2_scaled<12>(w);
    }
  }
  __device__ static float flush(const Scale& sc) { return sc.s; }
  // 2^(e-127): exact in fp16 for e in [103, 142]; the packer refuses e > 140 (weights past
  // fp16's range), smaller ones give weights fp16 cannot hold anyway (0).
  __device__ static float block_pow2(const Scale& sc) { return sc.s * 0x1p-14f; }
};

// A weight chunk decoded to fp16 with every scale applied (fp32 scales rounded to fp16:
// the tensor cores take fp16 operands).
template <class Fmt>
__device__ __forceinline__ void decode_chunk_full(const Raw16& raw, const typename Fmt::Scale& sc, half2_t* out) {
  if constexpr (Fmt::kFlushScaled) {
    if constexpr (Fmt::kPow2Tile) {
      // decode · 2^14 restores the exact E2M1 value, then · 2^(e-127): both steps exact.
      const half2_t up = half2_t{0x74007400u};  // 2^14 in both halves
      const half2_t f = half2_splat(float_to_half(Fmt::block_pow2(sc)));
#pragma unroll
      for (int p = 0; p < Fmt::kPerChunk / 2; ++p) out[p] = hmul2(hmul2(Fmt::decode(raw, p, sc), up), f);
    } else {
      const half2_t f = half2_splat(float_to_half(Fmt::flush(sc)));
#pragma unroll
      for (int p = 0; p < Fmt::kPerChunk / 2; ++p) out[p] = hmul2(Fmt::decode(raw, p, sc), f);
    }
  } else {
#pragma unroll
    for (int p = 0; p < Fmt::kPerChunk / 2; ++p) out[p] = Fmt::decode(raw, p, sc);
  }
}

}  // namespace onecat
