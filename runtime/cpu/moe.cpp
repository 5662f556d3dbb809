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

float moe_sigmoid(float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); }

namespace {

// Top-k of `value` over [0, n) by value, ties to the lower index.
void top_by_value(const std::vector<float>& value, int k, std::vector<int32_t>& order) {
  order.resize(value.size());
  for (size_t i = 0; i < value.size(); ++i) order[i] = int32_t(i);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return value[size_t(a)] > value[size_t(b)] || (value[size_t(a)] == value[size_t(b)] && a < b);
  });
}

}  // namespace

MoeRoute moe_route(const uint16_t* logits, int64_t tokens, const MoeRouter& q) {
  const int experts = q.experts, topk = q.topk;
  MoeRoute r;
  r.ids.resize(size_t(tokens * topk));
  r.weights.resize(size_t(tokens * topk));
  std::vector<float> p(static_cast<size_t>(experts)), choice(static_cast<size_t>(experts));
  std::vector<float> group_score(static_cast<size_t>(q.groups));
  std::vector<int32_t> order, group_order;
  const int per_group = experts / q.groups;
  for (int64_t t = 0; t < tokens; ++t) {
    const uint16_t* row = logits + t * experts;
    if (q.sigmoid) {
      for (int e = 0; e < experts; ++e) {
        p[size_t(e)] = moe_sigmoid(half_to_float(row[e]));
        choice[size_t(e)] = p[size_t(e)] + (q.bias != nullptr ? q.bias[e] : 0.f);
      }
      if (q.groups > 1) {
        for (int g = 0; g < q.groups; ++g) {
          float a = -INFINITY, b = -INFINITY;  // the group's two best choice values
          for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
            const float v = choice[size_t(e)];
            if (v > a) {
              b = a, a = v;
            } else if (v > b) {
              b = v;
            }
          }
          group_score[size_t(g)] = a + b;
        }
        top_by_value(group_score, q.topk_groups, group_order);
        std::vector<bool> chosen(size_t(q.groups), false);
        for (int g = 0; g < q.topk_groups; ++g) chosen[size_t(group_order[size_t(g)])] = true;
        for (int e = 0; e < experts; ++e) {
          if (!chosen[size_t(e / per_group)]) choice[size_t(e)] = 0.f;
        }
      }
    } else {
      // Softmax keeps the logits' order: choose by the fp16 logits themselves.
      float max = -INFINITY;
      for (int e = 0; e < experts; ++e) max = std::max(max, half_to_float(row[e]));
      float sum = 0;
      for (int e = 0; e < experts; ++e) sum += (p[size_t(e)] = std::exp(half_to_float(row[e]) - max));
      for (float& v : p) v /= sum;
      for (int e = 0; e < experts; ++e) choice[size_t(e)] = half_to_float(row[e]);
    }
    top_by_value(choice, topk, order);
    float chosen = 0;
    for (int k = 0; k < topk; ++k) chosen += p[size_t(order[size_t(k)])];
    if (q.sigmoid) chosen += 1e-20f;
    for (int k = 0; k < topk; ++k) {
      const int32_t e = order[size_t(k)];
      r.ids[size_t(t * topk + k)] = e;
      r.weights[size_t(t * topk + k)] = (q.norm ? p[size_t(e)] / chosen : p[size_t(e)]) * q.scale;
    }
  }
  moe_group(r.ids, experts, r.offsets, r.sorted);
  return r;
}

MoeRoute moe_route(const uint16_t* logits, int64_t tokens, int experts, int topk, bool norm) {
  MoeRouter q;
  q.experts = experts, q.topk = topk, q.norm = norm;
  return moe_route(logits, tokens, q);
}

}  // namespace onecat::cpu
