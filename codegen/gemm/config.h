// gemm config: what the tuner varies. Two strategies:
//   strategy=gemv,mt=1,rows=2,warps=4                            small M (templates/gemm/gemv.cuh)
//   strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2                larger M, any arch (templates/gemm/mma.cuh)
//   strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4   sm_80+ (templates/gemm/mma16816_padded.cuh)
//   strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=4,pipe=2   (mma16816_swizzled.cuh)
//   strategy=tc_small,mt=16,rows=64,warps=4,stages=3,split=4     M ≤ 16, sm_80+ (templates/gemm/tc_small.cuh)
//   strategy=cublas                                               cuBLAS fp16 (runtime/engine/gemm_launch.cpp)
// gemv: a CTA of `warps` warps (1 to 16) owns `rows` output rows and a tile of `mt` tokens;
// its warps split K, each lane streaming 16-byte chunks of weight rows.
// mma: a CTA computes a bm (tokens) × bn (weight rows) tile with wm × wn warps on tensor
// cores. atom=wmma (Volta's instruction on sm_70): K in steps of 32, register prefetch and
// two shared buffers. atom=m16n8k16 (sm_80+): K in steps of bk, `stages` cp.async buffers;
// pipe=1 (the default below 512 tokens): padded shared rows, decode within the step (two barriers
// per step); pipe=2 (the default from 512 tokens): unpadded
// swizzled rows, decode one step ahead (one barrier per step, decoded formats need stages ≥ 3),
// fragment double buffering, up to 5 stages. split=S (wmma, pipe=2, tc_small): S CTAs per output tile
// on S parts of K, summed in fp32 through a workspace (for few output tiles).
// tc_small: a CTA of `warps` warps owns `rows` output rows (16, 32 or 64) and `mt` tokens (8
// or 16) on mma.m16n8k16 with W as the A operand; its warps split K, decoding weight chunks
// in registers straight into fragments; split=S as for mma (S CTAs per tile on S runs of
// k-blocks).
// cublas: cuBLAS's fp16 GEMM (fp32 accumulation) on the weights as they are (f16) or
// dequantised to fp16 by the strategy's own kernel into a scratch buffer shared between
// layers (templates/gemm/cublas_aux.cuh), which also does what cuBLAS does not (silu_mul,
// the bias or residual). An ordinary candidate the tuner times like the others; needs a
// cuBLAS the process can load (CUDA 12's on sm_70), and plain K order (not act_order).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/gemm/spec.h"

namespace onecat::gemm {

enum class Strategy { kGemv, kMma, kTcSmall, kCublas };
enum class Atom { kWmma, kM16n8k16 };

struct Config {
  // gemv: registers a thread may spend on raw weight chunks (4 per row) and on fp32
  // accumulators: with ~60 for addressing, scales, loop state and one token's x this stays
  // under sm_70's 255.
  static constexpr int kMaxWeightRegs = 64;
  static constexpr int kMaxAccumulators = 64;
  static constexpr int kRegsPerChunk = 4;  // one 16-byte load
  static constexpr int kMaxSharedBytes = 48 * 1024;  // static shared memory per CTA
  // mma: fp32 accumulators per thread (8 per 16×16 fragment); 128 leaves room for operands.
  static constexpr int kMaxMmaAccumulators = 128;
  static constexpr int kMmaBk = 32;   // K step (templates/gemm/mma.cuh kMmaBk)
  static constexpr int kMmaPad = 8;   // halves of padding per shared row
  // m16n8k16: dynamic shared memory per CTA, kept under what every sm_80+ part grants (sm_86/89: 99 KiB).
  static constexpr int kMaxDynamicSharedBytes = 96 * 1024;

  Strategy strategy = Strategy::kGemv;
  int mt = 1;     // gemv, tc_small: tokens per CTA (gemv: the M bucket's size; tc_small: 8 or 16)
  int rows = 2;   // gemv, tc_small: output rows per CTA
  int warps = 4;  // gemv, tc_small: warps per CTA, splitting K
  int bm = 64, bn = 128, wm = 2, wn = 2;  // mma
  Atom atom = Atom::kWmma;                // mma
  int bk = 32, stages = 2;                // mma with atom=m16n8k16 (wmma: 32 and 2); tc_small: 1 = registers, 2..4 = cp.async ring
  int pipe = 1;                           // mma with atom=m16n8k16: the pipeline (above)
  // mma (atom=wmma, or m16n8k16 with pipe=2) and tc_small: CTAs per output tile, each on
  // 1/split of K; the last to finish sums their fp32 partials through a workspace
  // (templates/gemm/split_k.cuh).
  int split = 1;
  static constexpr int kMaxSplit = 16;

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int slots(const Spec& spec) const { return spec.epilogue == Epilogue::kSiluMul ? 2 * rows : rows; }
  // Dynamic shared memory of an m16n8k16 CTA (0 for the other kernels, whose is static).
  int shared_bytes(const Spec& spec) const;
  int threads() const {
    return strategy == Strategy::kMma ? wm * wn * 32 : strategy == Strategy::kCublas ? kCublasAuxThreads : warps * 32;
  }
  static constexpr int kCublasAuxThreads = 256;  // templates/gemm/cublas_aux.cuh
  // tc_small: 16-row weight tiles per CTA and fp32 accumulators per thread.
  int tc_small_tiles(const Spec& spec) const { return slots(spec) / 16; }
  int tc_small_accumulators(const Spec& spec) const { return tc_small_tiles(spec) * (mt / 8) * 4; }
  // tc_small: floats of one CTA's split-K partial (its accumulators, threads × per-thread
  // values of templates/gemm/tc_small.cuh, padded to whole threads).
  int tc_small_partial_floats(const Spec& spec) const {
    const int sums = tc_small_accumulators(spec) * 32;
    return (sums + threads() - 1) / threads() * threads();
  }
  static constexpr int kMaxTcSmallAccumulators = 32;
  // tc_small: registers of one k-block's x pieces and (stages=1) raw weight chunks, held twice:
  // the next block is in flight during this one's math.
  int tc_small_stage_regs(const Spec& spec) const {
    return (stages == 1 ? tc_small_tiles(spec) * 2 * 4 : 0) + (mt / 8) * spec.per_chunk() / 2;
  }
  static constexpr int kMaxTcSmallStageRegs = 40;
  // Both together, which with the decoded chunks, scales and addresses stays under 255
  // registers without spills on sm_90 with NVRTC 13 (mt=16 with 64 rows, or 32 gated rows, is
  // exactly 64: 148–220 registers; GemmStaticQuality.Sm90TcSmallCompilesWithoutSpills).
  static constexpr int kMaxTcSmallAccumulatorAndStageRegs = 64;
  // tc_small: static shared memory, the larger of the weight ring (stages ≥ 2) and the
  // cross-warp partial sums (templates/gemm/tc_small.cuh).
  int tc_small_shared_bytes(const Spec& spec) const {
    const int ring = stages > 1 ? stages * tc_small_tiles(spec) * 2 * threads() * 16 : 0;
    const int partial = warps * tc_small_accumulators(spec) * 32 * 4;
    return ring > partial ? ring : partial;
  }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::gemm
