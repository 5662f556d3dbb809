// attention search space: the tuner's candidates and the deterministic default per bucket.
// The bucket m is the token count for prefill and kv_write and the batch (sequences) for
// decode and verify (docs/attention.md).
#pragma once
#include <cstdint>
#include <vector>

#include "base/arch.h"
#include "codegen/attention/config.h"

namespace onecat::attention {

// sm_80+ gets the m16n8k16 atom (its candidates add to the WMMA ones); sm_70 WMMA only.
Config default_config(const Spec& spec, int64_t m, Arch arch);
std::vector<Config> candidate_configs(const Spec& spec, Arch arch);
bool fits_bucket(const Spec& spec, const Config& config, int64_t m);

}  // namespace onecat::attention
