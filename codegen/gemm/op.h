// gemm's typed op: y = x · Wᵀ (+ the spec's epilogue) for m tokens, W packed in the spec's
// weight format (models/quant/pack.h). Pointers the spec has no use for are ignored.
#pragma once
#include <cstdint>

#include "codegen/gemm/config.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/spec.h"
#include "codegen/kernel_call.h"

namespace onecat::gemm {

struct Args {
  DevicePtr y = 0, x = 0;                                // [m][out_cols] fp16 or fp32, [m][k] fp16
  DevicePtr qweight = 0, scales = 0, zeros = 0, perm = 0;  // the packed weight's buffers
  float global_scale = 1.f;                              // nvfp4's second-level scale
  DevicePtr bias = 0;                                    // epi=bias: [n] fp16
  DevicePtr residual = 0;                                // epi=residual: [m][n] fp16 (may be y: in place)
  DevicePtr norm_weight = 0;                             // norm=rms: [k] fp16
  float norm_eps = 1e-6f;                                // norm=rms
  int64_t m = 0;
  // split > 1: workspace_floats fp32 partials and workspace_counters counters, zeroed once
  // when allocated (each launch leaves them zero); one launch at a time per workspace.
  DevicePtr partial = 0, counters = 0;
  // strategy=cublas: scratch_bytes(spec, config, m) bytes, any contents (one launch at a time).
  DevicePtr scratch = 0;
};

// Both parts of the split-K workspace in bytes, counters after the partials (0 without split).
int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t m);
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);

// strategy=cublas (runtime/engine/gemm_launch.cpp). The scratch holds the weights dequantised
// to fp16 [n][k] (formats other than f16) and then, for epi=silu_mul, cuBLAS's fp32 product
// of up to kCublasRows tokens at a time (the epilogue reads both halves of a row).
inline constexpr int64_t kCublasRows = 512;
int64_t scratch_bytes(const Spec& spec, const Config& config, int64_t m);
int64_t cublas_product_offset(const Spec& spec);  // where the fp32 product starts in the scratch
// One launch of the strategy's kernel: `rows` tokens from token `row0` (the epilogue and the
// fill), or the whole weight (dequantise).
KernelCall make_cublas_aux_call(const Spec& spec, const Args& args, CublasPhase phase, int64_t row0, int64_t rows);

}  // namespace onecat::gemm
