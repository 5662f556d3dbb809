#include "codegen/embedding/space.h"

#include <algorithm>

#include "codegen/tokens.h"
#include "base/error.h"

namespace onecat::embedding {
namespace {

// CTA sizes the search tries: a copy has nothing to hide but memory latency.
constexpr int kCtaSizes[] = {64, 128, 256, 512};
// The default CTA: rows of a few hundred bytes share one, long rows take 256 threads.
constexpr int kDefaultCtaThreads = 128;
constexpr int kDefaultMaxRowThreads = 256;

}  // namespace

Config default_config(const Spec& spec, int64_t m) {
  Config c;
  for (int v : {8, 4, 2, 1}) {
    if (spec.hidden % v == 0) {
      c.vec = v;
      break;
    }
  }
  const int vectors = spec.hidden / c.vec;
  // Two accesses per thread: two loads in flight each without many registers.
  c.row_threads = int(std::min<int64_t>(pow2_ceil((vectors + 1) / 2), kDefaultMaxRowThreads));
  auto choose_rows = [&] {
    c.rows = std::max(1, kDefaultCtaThreads / c.row_threads);
    c.rows = int(std::min<int64_t>(c.rows, pow2_ceil(m)));
    c.rows = std::max(c.rows, Config::kMinCtaThreads / std::min(c.row_threads, Config::kMinCtaThreads));
  };
  // Wider rows until each thread's accesses fit (long rows of odd width).
  for (choose_rows(); c.invalid_reason(spec) && c.row_threads < Config::kMaxCtaThreads; choose_rows()) {
    c.row_threads *= 2;
  }
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid config: " + *why);
  return c;
}

std::vector<Config> candidate_configs(const Spec& spec) {
  std::vector<Config> out;
  for (int vec : {8, 4, 2, 1}) {
    for (int row_threads = 1; row_threads <= Config::kMaxCtaThreads; row_threads *= 2) {
      for (int cta : kCtaSizes) {
        if (cta < row_threads) continue;
        Config c{row_threads, vec, cta / row_threads};
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
      Config whole{row_threads, vec, 1};  // one row per CTA at any width up to 1024
      if (row_threads > kCtaSizes[std::size(kCtaSizes) - 1] && !whole.invalid_reason(spec)) out.push_back(whole);
    }
  }
  return out;
}

bool fits_bucket(const Spec&, const Config& c, int64_t m) { return c.rows <= pow2_ceil(m); }

}  // namespace onecat::embedding
