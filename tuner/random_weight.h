// Random weights in the kernel layout of a gemm spec's format (docs/gemm.md), with values in
// the range real checkpoints have, for GPU checks and benchmarks.
#pragma once
#include <random>

#include "codegen/gemm/spec.h"
#include "models/quant/format.h"

namespace onecat {

quant::PackedWeight random_packed_weight(const gemm::Spec& spec, std::mt19937_64& rng);

}  // namespace onecat
