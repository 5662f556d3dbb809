// embedding config: what the tuner varies.
//   row_threads=128,vec=8,rows=1
// row_threads threads copy one token's row, each moving vec fp16 values per access (vec·2
// bytes: 16 is one 128-bit load and store); a CTA holds `rows` tokens.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/common/row_config.h"
#include "codegen/embedding/spec.h"

namespace onecat::embedding {

struct Config {
  static constexpr int kMaxCtaThreads = row_config::kMaxCtaThreads;
  static constexpr int kMinCtaThreads = row_config::kMinCtaThreads;
  // A thread issues all its loads before its first store (they overlap in flight) and holds
  // them meanwhile: 16 loads of 16 bytes are 64 registers, within sm_70's 255 per thread at
  // any CTA size this family uses.
  static constexpr int kMaxIters = 16;

  int row_threads = 128;
  int vec = 8;
  int rows = 1;

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  // Why this config cannot run the spec, or nothing when it can.
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int cta_threads() const { return row_threads * rows; }
  int iters(const Spec& spec) const { return (spec.hidden / vec + row_threads - 1) / row_threads; }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::embedding
