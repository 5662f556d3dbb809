#include "runtime/cpu/moe.h"

#include <algorithm>
#include <cmath>

#include "base/half.h"

namespace onecat::cpu {

void moe_group(const std::vector<int32_t>& ids, int experts, std::vector<int32_t>& offsets,
               std::vector<int32_t>& sorted) {
  offsets.assign(size_t(experts) + 1, 0);
  for (int32_t e : ids) ++offsets[size_t(e) + 1];
  for (int e = 0; e < experts; ++e) offsets[size_t(e) + 1] += offsets[size_t(e)];
  std::vector<int32_t> cursor(offsets.begin(), offsets.end() - 1);
  sorted.assign(ids.size(), 0);
  for (size_t p = 0; p < ids.size(); ++p) sorted[size_t(cursor[size_t(ids[p])]++)] = int32_t(p);
}

MoeRoute moe_route(const uint16_t* logits, int64_t tokens, int experts, int topk, bool norm) {
  MoeRoute r;
  r.ids.resize(size_t(tokens * topk));
  r.weights.resize(size_t(tokens * topk));
  std::vector<float> p(static_cast<size_t>(experts));
  std::vector<int32_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const uint16_t* row = logits + t * experts;
    float max = -INFINITY;
    for (int e = 0; e < experts; ++e) max = std::max(max, half_to_float(row[e]));
    float sum = 0;
    for (int e = 0; e < experts; ++e) sum += (p[size_t(e)] = std::exp(half_to_float(row[e]) - max));
    for (float& v : p) v /= sum;
    for (int e = 0; e < experts; ++e) order[size_t(e)] = e;
    std::partial_sort(order.begin(), order.begin() + topk, order.end(), [&](int32_t a, int32_t b) {
      const float la = half_to_float(row[a]), lb = half_to_float(row[b]);
      return la > lb || (la == lb && a < b);
    });
    float chosen = 0;
    for (int k = 0; k < topk; ++k) chosen += p[size_t(order[size_t(k)])];
    for (int k = 0; k < topk; ++k) {
      const int32_t e = order[size_t(k)];
      r.ids[size_t(t * topk + k)] = e;
      r.weights[size_t(t * topk + k)] = norm ? p[size_t(e)] / chosen : p[size_t(e)];
    }
  }
  moe_group(r.ids, experts, r.offsets, r.sorted);
  return r;
}

}  // namespace onecat::cpu
