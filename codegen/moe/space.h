// moe search space: the tuner's candidates and the deterministic untuned default.
#pragma once
#include <cstdint>
#include <vector>

#include "base/arch.h"
#include "codegen/moe/config.h"

namespace onecat::moe {

Config default_config(const Spec& spec, int64_t m, Arch arch);
std::vector<Config> candidate_configs(const Spec& spec, Arch arch);  // tc_small from sm_80
// Whether the tuner times this candidate for token count m.
bool fits_bucket(const Spec& spec, const Config& config, int64_t m);

}  // namespace onecat::moe
