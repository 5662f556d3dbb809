// rmsnorm config: what the tuner varies.
//   row_threads=128,vec=8,rows=1
// row_threads threads share one row, each loading vec fp16 values per access (vec*2
// bytes: 16 is one 128-bit load); a CTA holds `rows` rows.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/common/row_config.h"
#include "codegen/rmsnorm/spec.h"

namespace onecat::rmsnorm {

struct Config {
  // A thread keeps its share of the row in fp32 registers between the two passes; 64
  // values (64 registers) leaves room for addressing within sm_70's 255 per thread.
  static constexpr int kMaxValuesPerThread = 64;
  static constexpr int kMaxCtaThreads = row_config::kMaxCtaThreads;
  // 64K 32-bit registers per SM on sm_70 … sm_90: a CTA of T threads gets 65536 / T each
  // (capped at 255); the row may take half of them, the rest is addressing and loop state.
  static constexpr int kRegistersPerSm = 65536;
  static constexpr int kMaxRegistersPerThread = 255;
  // Unrolled loads per thread; beyond this their addresses and predicates crowd out the row.
  static constexpr int kMaxIters = 16;
  static constexpr int kMinCtaThreads = row_config::kMinCtaThreads;

  int row_threads = 128;
  int vec = 8;
  int rows = 1;

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  // Why this config cannot run the spec, or nothing when it can.
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int cta_threads() const { return row_threads * rows; }
  int iters(const Spec& spec) const {
    int vectors = spec.hidden / vec;
    return (vectors + row_threads - 1) / row_threads;
  }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::rmsnorm
