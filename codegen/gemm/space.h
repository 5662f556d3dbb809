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
// The most tokens whose default config is the gemv (sm_80+ defaults to tc_small from a few
// tokens): where a forward fuses a norm into the gemv (spec norm=rms) at no cost to the gemm.
int64_t gemv_default_max_m(Arch arch);
// Whether the tuner times this candidate for token count m.
bool fits_bucket(const Spec& spec, const Config& config, int64_t m);
// Whether strategy=cublas is the better untuned choice for m tokens: f16 weights beyond the
// gemv/tc_small sizes, dequantising formats from kCublasPackedMinM tokens, never act_order.
// default_config() stays onecat's own kernel (codegen knows nothing of the machine); the runtime
// picks cuBLAS where it can run (runtime/engine/gemm_launch.h: default_config_here).
bool cublas_by_default(const Spec& spec, int64_t m);

}  // namespace onecat::gemm
