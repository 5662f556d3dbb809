// One projection's expert weights stacked in the layout the moe kernels read: each buffer
// holds expert after expert at a fixed stride (op.h's *_stride), with their nvfp4 global
// scales. The GPU backend, the Python bindings and the GPU check stack through it.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "codegen/moe/spec.h"
#include "codegen/weight_format.h"

namespace onecat::moe {

struct StackedExperts {
  std::vector<uint8_t> qweight, scales, zeros;
  std::vector<int32_t> perm;
  std::vector<float> global_scales;
  int64_t qweight_stride = 0, scales_stride = 0, zeros_stride = 0;
};

// The spec fields of a weight's format: ",fmt=…,group=…,act_order=…" (experts with the same
// fields stack together).
std::string weight_fields(const quant::PackedWeight& w);

// Throws InputError "<name(e)> is <fmt> N×K, <name(0)> <fmt> N×K: one shape and weight format
// for every expert" for the first weight that differs from the first one.
StackedExperts stack_experts(std::span<const quant::PackedWeight* const> weights,
                             const std::function<std::string(size_t)>& name);

// The gate_up or down spec text of experts whose weights have `fields` (weight_fields).
std::string projection_spec(Op op, int64_t experts, int64_t topk, int64_t hidden, int64_t inter,
                            const std::string& fields);

}  // namespace onecat::moe
