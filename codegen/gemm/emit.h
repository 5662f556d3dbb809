// gemm: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order: void* y, const half* x, const void* qweight,
// const void* scales, const void* zeros, const int* perm, float global_scale,
// const half* bias, const half* residual, int m (null pointers where the spec has none).
#pragma once
#include <cstdint>

#include "codegen/family.h"
#include "codegen/gemm/config.h"
#include "codegen/gemm/spec.h"

namespace onecat::gemm {

inline constexpr int kGeneratorVersion = 3;  // 3: tc_small, pipe=2 (swizzled, decode ahead, up to 5 stages)

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t m);
// The template type that reads the spec's weight format (templates/gemm/formats.cuh).
std::string format_type(const Spec& spec);

}  // namespace onecat::gemm
