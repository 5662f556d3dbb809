// gemm: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order: void* y, const half* x, const void* qweight,
// const void* scales, const void* zeros, const int* perm, float global_scale,
// const half* bias, const half* residual, int m (null pointers where the spec has none),
// float* partial, unsigned* counters (the split-K workspace; null where the config has
// split=1: kernels without split-K do not declare them, and cuLaunchKernel reads only the
// parameters a kernel declares).
#pragma once
#include <cstdint>

#include "codegen/family.h"
#include "codegen/gemm/config.h"
#include "codegen/gemm/spec.h"

namespace onecat::gemm {

// 3: tc_small, pipe=2 (swizzled, decode ahead, up to 5 stages); 4: pipe=2 spreads a step's
// loads over its mma groups (configs rank anew), split-K (split=S) for wmma and pipe=2;
// 5: split-K for tc_small; 6: strategy=cublas.
inline constexpr int kGeneratorVersion = 6;

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t m);
// strategy=cublas's kernel (templates/gemm/cublas_aux.cuh), by phase: one thread per weight
// chunk (dequantise) or per output element of `rows` tokens (the epilogue, the fill).
enum class CublasPhase { kDequantise = 0, kEpilogue = 1, kFill = 2 };
LaunchGeometry cublas_aux_geometry(const Spec& spec, CublasPhase phase, int64_t rows);
// The split-K workspace a launch of `config` on m tokens needs (0 and 0 without split):
// fp32 partials and unsigned counters, the counters zeroed once when allocated (each launch
// leaves them zero). A workspace serves one launch at a time.
int64_t workspace_floats(const Spec& spec, const Config& config, int64_t m);
int64_t workspace_counters(const Spec& spec, const Config& config, int64_t m);
// The template type that reads the spec's weight format (templates/gemm/formats.cuh).
std::string format_type(const Spec& spec);

}  // namespace onecat::gemm
