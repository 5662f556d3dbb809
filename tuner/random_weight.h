// Random weights in the kernel layout of a gemm spec's format (docs/gemm.md), with values in
// the range real checkpoints have, for GPU checks and benchmarks.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "codegen/gemm/spec.h"
#include "models/quant/format.h"

namespace onecat {

quant::PackedWeight random_packed_weight(const gemm::Spec& spec, std::mt19937_64& rng);

// n fp16 values (as bits) drawn uniformly from [lo, hi), in order, from rng.
std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float lo, float hi);

}  // namespace onecat
