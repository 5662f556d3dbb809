#include "codegen/moe/experts.h"

#include "base/error.h"

namespace onecat::moe {

std::string weight_fields(const quant::PackedWeight& w) {
  return ",fmt=" + std::string(quant::format_name(w.format)) + ",group=" + std::to_string(w.group) +
         ",act_order=" + (w.perm.empty() ? "0" : "1");
}

StackedExperts stack_experts(std::span<const quant::PackedWeight* const> weights,
                             const std::function<std::string(size_t)>& name) {
  StackedExperts s;
  const quant::PackedWeight& first = *weights.front();
  auto shape = [](const quant::PackedWeight& w) {
    return std::string(quant::format_name(w.format)) + " " + std::to_string(w.n) + "×" + std::to_string(w.k);
  };
  for (size_t e = 0; e < weights.size(); ++e) {
    const quant::PackedWeight& w = *weights[e];
    if (weight_fields(w) != weight_fields(first) || w.n != first.n || w.k != first.k ||
        w.qweight.size() != first.qweight.size() || w.scales.size() != first.scales.size() ||
        w.zeros.size() != first.zeros.size()) {
      throw InputError(name(e) + " is " + shape(w) + ", " + name(0) + " " + shape(first) +
                       ": one shape and weight format for every expert");
    }
    s.qweight.insert(s.qweight.end(), w.qweight.begin(), w.qweight.end());
    s.scales.insert(s.scales.end(), w.scales.begin(), w.scales.end());
    s.zeros.insert(s.zeros.end(), w.zeros.begin(), w.zeros.end());
    s.perm.insert(s.perm.end(), w.perm.begin(), w.perm.end());
    s.global_scales.push_back(w.global_scale);
  }
  s.qweight_stride = int64_t(first.qweight.size()), s.scales_stride = int64_t(first.scales.size());
  s.zeros_stride = int64_t(first.zeros.size());
  return s;
}

std::string projection_spec(Op op, int64_t experts, int64_t topk, int64_t hidden, int64_t inter,
                            const std::string& fields) {
  return "moe:op=" + std::string(op_name(op)) + ",experts=" + std::to_string(experts) + ",topk=" +
         std::to_string(topk) + ",hidden=" + std::to_string(hidden) + ",inter=" + std::to_string(inter) + fields;
}

}  // namespace onecat::moe
