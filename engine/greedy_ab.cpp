#include "engine/greedy_ab.h"

#include <algorithm>

#include "base/error.h"

namespace onecat::engine {

GreedyAb compare_greedy(model::Model& variant, std::span<const std::vector<int32_t>> prompts,
                        std::span<const std::vector<int32_t>> target, std::span<const std::vector<int32_t>> other,
                        double tie) {
  if (target.size() != prompts.size() || other.size() != prompts.size()) {
    throw Error("compare_greedy: one output per prompt in each run");
  }
  GreedyAb r;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t>& a = target[i];
    const std::vector<int32_t>& b = other[i];
    if (a == b) {
      ++r.identical;
      continue;
    }
    GreedyAb::Divergence d;
    d.prompt = i;
    while (d.position < a.size() && d.position < b.size() && a[d.position] == b[d.position]) ++d.position;
    const size_t t = d.position;
    if (t < a.size()) d.target = a[t];
    if (t < b.size()) d.variant = b[t];
    if (d.target && d.variant) {
      std::vector<int32_t> prefix = prompts[i];
      prefix.insert(prefix.end(), b.begin(), b.begin() + std::ptrdiff_t(t));
      model::Sequence s;
      const std::vector<float> l = variant.extend(s, prefix);
      variant.release(s);
      const auto [lo, hi] = std::minmax_element(l.begin(), l.end());
      d.gap = double(l[size_t(*d.variant)] - l[size_t(*d.target)]) / std::max(1e-30, double(*hi - *lo));
      d.near_tie = d.gap <= tie;
    }
    (d.near_tie ? r.near_ties : r.divergences) += 1;
    if (!r.first) r.first = d;
  }
  return r;
}

}  // namespace onecat::engine
