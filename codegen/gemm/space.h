// gemm search space: the tuner's candidates and the deterministic default per M.
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/gemm/config.h"

namespace onecat::gemm {

Config default_config(const Spec& spec, int64_t m);
std::vector<Config> candidate_configs(const Spec& spec);

}  // namespace onecat::gemm
