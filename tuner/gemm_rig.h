// Everything a gemm kernel of one spec runs on, on the GPU: random weights in the spec's
// format (rotated copies, so the L2 never serves a repeat when timing), fresh random
// x / bias / residual for m tokens, a poisoned output with guard rows behind it, the
// reference result, and cuBLAS fp16 on the dequantised weights as the speed peer. The
// checks, the tuner's workload and `onecat bench` all run on one of these, so a spec's
// weights are made once however many configs and token counts are run on them.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/gemm/config.h"
#include "codegen/gemm/spec.h"
#include "codegen/weight_format.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "tuner/output_compare.h"
#include "tuner/verify.h"

namespace onecat {

// Up to this many multiply-adds the reference is the CPU's (runtime/cpu/gemm, fp64);
// beyond, cuBLAS with fp32 accumulation on the dequantised weights.
inline constexpr double kGemmCpuReferenceMacs = double(int64_t(1) << 28);

// The gemm check's bounds: |gpu − ref| / |ref| over the whole output, and per element.
double gemm_tolerance(const gemm::Spec& spec);
ElementBound element_bound(const gemm::Spec& spec);

class GemmRig {
 public:
  // weight_copies: how many copies of the packed weights to rotate through (1 for checks),
  // or kRotate: enough that together they exceed the L2 three times.
  static constexpr int kRotate = 0;
  GemmRig(const gemm::Spec& spec, uint64_t seed, int weight_copies);
  ~GemmRig();
  GemmRig(const GemmRig&) = delete;
  GemmRig& operator=(const GemmRig&) = delete;

  const gemm::Spec& spec() const { return spec_; }
  const quant::PackedWeight& weight() const { return w_; }
  int weight_copies() const { return int(copies_.size()); }
  int64_t m() const { return m_; }

  // Fresh random inputs for m tokens; the previous reference is dropped.
  void prepare(int64_t m);
  // Enqueues the kernel on weight copy `copy` (mod the number of copies).
  void launch(const LoadedKernel& kernel, const gemm::Config& config, int copy, CUstream stream = nullptr);
  // Enqueues cuBLAS fp16 × fp16 → fp16 (plain product, packed column order) on copy `copy`
  // of the dequantised weights (made on first use, as many copies as the packed ones).
  void launch_cublas(int copy, CUstream stream = nullptr);
  // Poisons the output, runs the kernel once, compares with the reference.
  CheckResult check(const LoadedKernel& kernel, const gemm::Config& config);
  // ‖kernel − cuBLAS‖ / ‖cuBLAS‖ on copy 0 (plain product specs only).
  double error_vs_cublas(const LoadedKernel& kernel, const gemm::Config& config);

 private:
  const std::vector<float>& reference();
  const std::vector<float>& reference_as_output();  // rounded to fp16 as an fp16 output holds it
  void make_fp16_weights();
  void use_cublas_stream(CUstream stream);  // and the workspace (Cublas::use_stream)
  std::vector<float> cublas_product_f32();

  struct Copy {
    DeviceBuffer q, s, z, p;
  };
  gemm::Spec spec_;
  std::mt19937_64 rng_;
  quant::PackedWeight w_;
  std::vector<Copy> copies_;
  int64_t m_ = 0;
  std::vector<uint16_t> x_, bias_, residual_;
  // norm=rms: the norm's weight, and x normed as the rmsnorm op rounds it (the reference's input).
  std::vector<uint16_t> gamma_, x_normed_;
  DeviceBuffer d_x_, d_x_perm_, d_bias_, d_residual_, d_y_, d_gamma_, d_x_normed_;
  std::vector<float> reference_;  // [m][out_cols], empty until asked for
  std::vector<float> reference_half_;  // reference_ rounded to fp16, for fp16 outputs
  std::vector<DeviceBuffer> w16_;
  DeviceBuffer d_peer_;
  SplitWorkspace workspace_;  // split-K (codegen/gemm/emit.h)
  DeviceBuffer scratch_;      // strategy=cublas (codegen/gemm/op.h), grown to the largest launch
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_workspace_;  // set on the handle, so a graph capture allocates nothing
};

}  // namespace onecat
