#include "engine/drafter.h"

#include <algorithm>

namespace onecat::engine {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int k, int min_n, int max_n) {
  const int64_t size = int64_t(tokens.size());
  if (k <= 0) return {};
  for (int64_t n = std::min<int64_t>(max_n, size - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size_t(size - n));
    // The latest earlier start i (i + n ≤ size − 1: the match is followed by at least one token).
    for (int64_t i = size - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n, to = std::min(size, from + k);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

}  // namespace onecat::engine

namespace onecat::engine {

std::vector<Draft> NgramDrafter::propose(std::span<const DraftRequest> requests) {
  std::vector<Draft> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i].tokens = ngram_draft(requests[i].tokens, requests[i].k, min_n_, max_n_);
  }
  return out;
}

}  // namespace onecat::engine
