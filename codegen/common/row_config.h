// The config of the row families (rmsnorm, embedding): row_threads threads share one row of
// `hidden` fp16 values, each accessing vec values at a time (vec*2 bytes: 16 is one 128-bit
// access); a CTA holds `rows` rows. Its text, the checks every such family makes, the
// untuned default and the tuner's candidates live here once; each family adds its own
// limits through its Config::invalid_reason (which calls common_invalid_reason first and
// idle_reason last, so every family's messages come in the same order).
//   row_threads=128,vec=8,rows=1
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "codegen/spec_text.h"
#include "codegen/tokens.h"

namespace onecat::row_config {

inline constexpr int kMaxCtaThreads = 1024;
inline constexpr int kMinCtaThreads = 32;

struct Fields {
  int row_threads = 0;
  int vec = 0;
  int rows = 0;
};

// The three fields of `text`, range-checked only (InputError naming the config otherwise).
Fields parse_fields(std::string_view text);
std::string to_string(int row_threads, int vec, int rows);
// vec ∈ {1, 2, 4, 8} divides hidden, row_threads and rows are powers of two, and
// 32 ≤ row_threads·rows ≤ 1024; the first of these that fails, or nothing.
std::optional<std::string> common_invalid_reason(int row_threads, int vec, int rows, int hidden);
// A row of hidden/vec accesses that leaves more than half of its row_threads idle.
std::optional<std::string> idle_reason(int row_threads, int vec, int hidden);
// The widest vec (8, 4, 2, 1) that divides hidden.
int widest_vec(int hidden);

// Config::parse of a row family: the fields, then the family's own invalid_reason.
template <class Config, class Spec>
Config parse(const Spec& spec, std::string_view text) {
  const Fields f = parse_fields(text);
  Config c;
  c.row_threads = f.row_threads, c.vec = f.vec, c.rows = f.rows;
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config " + quoted_input(text) + " cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

// The untuned default for m rows: the widest vec, two accesses per thread (two loads in
// flight without many registers) up to max_row_threads threads per row, rows filling a CTA
// of about cta_threads threads (no more rows than m's bucket, at least one warp); then wider
// rows until the family's checks pass. InputError when no width does.
template <class Config, class Spec>
Config default_config(const Spec& spec, int64_t m, int max_row_threads, int cta_threads) {
  Config c;
  c.vec = widest_vec(spec.hidden);
  const int vectors = spec.hidden / c.vec;
  c.row_threads = int(std::min<int64_t>(pow2_ceil((vectors + 1) / 2), max_row_threads));
  auto choose_rows = [&] {
    c.rows = std::max(1, cta_threads / c.row_threads);
    c.rows = int(std::min<int64_t>(c.rows, pow2_ceil(m)));
    c.rows = std::max(c.rows, kMinCtaThreads / std::min(c.row_threads, kMinCtaThreads));
  };
  for (choose_rows(); c.invalid_reason(spec) && c.row_threads < kMaxCtaThreads; choose_rows()) c.row_threads *= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid config: " + *why);
  return c;
}

// The tuner's candidates: every valid (vec, row_threads) at CTA sizes 64 … 512 (one warp hides
// too little latency, 1024 rarely helps), and one row per CTA at any wider row_threads.
template <class Config, class Spec>
std::vector<Config> candidate_configs(const Spec& spec) {
  constexpr int kCtaSizes[] = {64, 128, 256, 512};
  std::vector<Config> out;
  for (int vec : {8, 4, 2, 1}) {
    for (int row_threads = 1; row_threads <= kMaxCtaThreads; row_threads *= 2) {
      for (int cta : kCtaSizes) {
        if (cta < row_threads) continue;
        Config c;
        c.row_threads = row_threads, c.vec = vec, c.rows = cta / row_threads;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
      Config whole;  // one row per CTA at any width up to 1024
      whole.row_threads = row_threads, whole.vec = vec, whole.rows = 1;
      if (row_threads > kCtaSizes[std::size(kCtaSizes) - 1] && !whole.invalid_reason(spec)) out.push_back(whole);
    }
  }
  return out;
}

// Whether the tuner times a config of `rows` rows per CTA for m rows.
inline bool fits_bucket(int rows, int64_t m) { return rows <= pow2_ceil(m); }

}  // namespace onecat::row_config
