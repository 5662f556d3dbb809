// gemm config: what the tuner varies. Two strategies:
//   strategy=gemv,mt=1,rows=2,warps=4                            small M (templates/gemm/gemv.cuh)
//   strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2                larger M, any arch (templates/gemm/mma.cuh)
//   strategy=mma,atom=m16n8k16,bm=128,bn=256,wm=2,wn=4,bk=32,stages=4   sm_80+ (templates/gemm/mma16816.cuh)
// gemv: a CTA of `warps` warps owns `rows` output rows and a tile of `mt` tokens; its warps
// split K, each lane streaming 16-byte chunks of weight rows.
// mma: a CTA computes a bm (tokens) × bn (weight rows) tile with wm × wn warps on tensor
// cores. atom=wmma (Volta's instruction on sm_70): K in steps of 32, register prefetch and
// two shared buffers. atom=m16n8k16 (sm_80+): K in steps of bk, `stages` cp.async buffers
// (unpadded, swizzled), decoded formats decoded one step ahead (so they need stages ≥ 3).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/gemm/spec.h"

namespace onecat::gemm {

enum class Strategy { kGemv, kMma };
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
  static constexpr int kMmaPad = 8;   // halves of padding per shared row (atom=wmma)
  // m16n8k16: dynamic shared memory per CTA, kept under what every sm_80+ part grants (sm_86/89: 99 KiB).
  static constexpr int kMaxDynamicSharedBytes = 96 * 1024;

  Strategy strategy = Strategy::kGemv;
  int mt = 1;     // gemv: tokens per CTA (the M bucket's size)
  int rows = 2;   // gemv: output rows per CTA
  int warps = 4;  // gemv: warps per CTA, splitting K
  int bm = 64, bn = 128, wm = 2, wn = 2;  // mma
  Atom atom = Atom::kWmma;                // mma
  int bk = 32, stages = 2;                // mma with atom=m16n8k16 (wmma: 32 and 2)

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int slots(const Spec& spec) const { return spec.epilogue == Epilogue::kSiluMul ? 2 * rows : rows; }
  // Dynamic shared memory of an m16n8k16 CTA (0 for the other kernels, whose is static).
  int shared_bytes(const Spec& spec) const;
  int threads() const { return strategy == Strategy::kGemv ? warps * 32 : wm * wn * 32; }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::gemm
