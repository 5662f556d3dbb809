// sampling search space: the tuner's candidates and the deterministic untuned default.
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/sampling/config.h"

namespace onecat::sampling {

Config default_config(const Spec& spec, int64_t m);
std::vector<Config> candidate_configs(const Spec& spec);
// Whether the tuner times this candidate for m rows (argmax: splits that do not multiply
// small batches past a few CTAs per SM are skipped).
bool fits_bucket(const Spec& spec, const Config& config, int64_t m);

}  // namespace onecat::sampling
