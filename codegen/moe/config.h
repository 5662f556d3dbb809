// moe config: what the tuner varies, per op.
//   route:            threads=256
//   gate_up, down:    strategy=gemv,mt=4,rows=4,warps=4
//   combine:          threads=128
// route: one CTA of `threads` threads (a warp per token, then the grouping by expert).
// gate_up and down, strategy=gemv: a CTA owns `rows` output rows of one tile of up to `mt`
// pairs routed to the same expert (the tiles of each expert in pair order) and its warps split
// K, each lane streaming 16-byte chunks of the expert's weight rows (the gemm family's gemv,
// templates/gemm/gemv.cuh, with the token rows read by index).
// combine: a CTA of `threads` threads per token.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/moe/spec.h"

namespace onecat::moe {

struct Config {
  // gemv: as the gemm family's (codegen/gemm/config.h): fp32 accumulators and raw chunks per thread.
  static constexpr int kMaxAccumulators = 64;
  static constexpr int kMaxWeightRegs = 64;
  static constexpr int kRegsPerChunk = 4;

  Op op = Op::kRoute;  // the spec's op: which fields below apply (and print)
  int threads = 256;   // route, combine
  int mt = 1, rows = 4, warps = 4;  // gate_up, down

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  bool projection() const { return op == Op::kGateUp || op == Op::kDown; }
  int cta_threads() const { return projection() ? warps * 32 : threads; }
  int slots() const { return op == Op::kGateUp ? 2 * rows : rows; }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::moe
