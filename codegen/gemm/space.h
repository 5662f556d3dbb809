// gemm search space: the tuner's candidates and the deterministic default per M.
#pragma once
#include "base/arch.h"
#include <cstdint>
#include <vector>

#include "codegen/gemm/config.h"

namespace onecat::gemm {

// The default per M bucket and the tuner's candidates depend on the target: sm_80+ uses
// the m16n8k16 atom for mma tiles, sm_70 WMMA.
Config default_config(const Spec& spec, int64_t m, Arch arch);
std::vector<Config> candidate_configs(const Spec& spec, Arch arch);
// Whether the tuner times this candidate for token count m.
bool fits_bucket(const Spec& spec, const Config& config, int64_t m);

}  // namespace onecat::gemm
