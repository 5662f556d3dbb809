// gemm config: what the tuner varies.
//   strategy=gemv,mt=1,rows=2,warps=4
// gemv: a CTA of `warps` warps owns `rows` output rows and a tile of `mt` tokens; its warps
// split K, each lane streaming 16-byte chunks of weight rows (templates/gemm/gemv.cuh).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/gemm/spec.h"

namespace onecat::gemm {

struct Config {
  // Registers a thread may spend on raw weight chunks (4 per row) and on fp32 accumulators:
  // with ~60 for addressing, scales, loop state and one token's x this stays under 255.
  static constexpr int kMaxWeightRegs = 64;
  static constexpr int kMaxAccumulators = 64;
  static constexpr int kMaxSharedBytes = 48 * 1024;
  static constexpr int kRegsPerChunk = 4;  // one 16-byte load  // static shared memory limit per CTA

  int mt = 1;     // tokens per CTA (the M bucket's size)
  int rows = 2;   // output rows per CTA
  int warps = 4;  // warps per CTA, splitting K

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int slots(const Spec& spec) const { return spec.epilogue == Epilogue::kSiluMul ? 2 * rows : rows; }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::gemm
