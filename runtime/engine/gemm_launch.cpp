#include "runtime/engine/gemm_launch.h"

#include <algorithm>
#include <mutex>

#include "base/error.h"
#include "codegen/gemm/space.h"
#include "runtime/cuda/cublas.h"

namespace onecat::gemm {
namespace {

// One handle for the process (onecat drives one GPU per process: Session::use_gpu), its
// workspace given explicitly so that a captured GEMM allocates nothing. Never destroyed: the
// driver may be gone at exit.
class CublasGemm {
 public:
  static CublasGemm& get() {
    static CublasGemm* g = new CublasGemm();
    return *g;
  }
  // y (ldc = n) ← alpha · x · Wᵀ + beta · y for `rows` tokens, W [n][k] fp16, x [rows][k] fp16. No
  // text on this path (prefill steps run it eagerly): the message is built only for a failure.
  void gemm(CUstream stream, int64_t n, int64_t rows, int64_t k, float alpha, CUdeviceptr w, CUdeviceptr x, float beta,
            CUdeviceptr y, bool y_f32, const Spec& spec) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cublasStatus_t s = cublas_.use_stream(handle_, stream, workspace_)) {
      cublas_.check(s, "cublasSetStream/cublasSetWorkspace", "choosing the stream of " + spec.to_string());
    }
    if (cublasStatus_t s = cublas_.gemm_xwt(handle_, n, rows, k, alpha, w, x, beta, y, y_f32)) {
      cublas_.check(s, "cublasGemmEx", "running " + spec.to_string() + " with strategy=cublas");
    }
  }

 private:
  CublasGemm() : cublas_(Cublas::require()), workspace_(Cublas::kWorkspaceBytes) {
    cublas_.check(cublas_.cublasCreate(&handle_), "cublasCreate", "creating the cuBLAS handle of strategy=cublas");
  }
  Cublas& cublas_;
  DeviceBuffer workspace_;
  cublasHandle_t handle_ = nullptr;
  std::mutex mutex_;
};

}  // namespace

std::string unavailable_reason(const std::string& family, const std::string& spec, const std::string& config, int sm) {
  if (family != "gemm" || !config.starts_with("strategy=cublas")) return "";
  if (Config::parse(Spec::parse(spec), config).strategy != Strategy::kCublas) return "";
  return Cublas::unusable_reason(sm);
}

void ready_for_launch(const Config& config) {
  if (config.strategy == Strategy::kCublas) CublasGemm::get();
}

void launch_op(const Spec& spec, const Config& config, const LoadedKernel& kernel, const Args& a, CUstream stream) {
  if (config.strategy != Strategy::kCublas) {
    launch(kernel, make_call(spec, config, a), stream);
    return;
  }
  if (!a.scratch && scratch_bytes(spec, config, a.m) > 0) {
    throw Error("gemm " + spec.to_string() + " with strategy=cublas was launched without its scratch buffer");
  }
  CublasGemm& cublas = CublasGemm::get();
  CUdeviceptr w = a.qweight;
  if (spec.format != WeightFormat::kF16) {
    launch(kernel, make_cublas_aux_call(spec, a, CublasPhase::kDequantise, 0, 0), stream);
    w = a.scratch;
  }
  // nvfp4's global scale is alpha; every other format has 1 there, as the kernels' epilogue applies it.
  const float alpha = a.global_scale;
  if (spec.epilogue == Epilogue::kSiluMul) {
    const CUdeviceptr product = a.scratch + CUdeviceptr(cublas_product_offset(spec));
    for (int64_t row0 = 0; row0 < a.m; row0 += kCublasRows) {
      const int64_t rows = std::min(kCublasRows, a.m - row0);
      cublas.gemm(stream, spec.n, rows, spec.k, alpha, w, a.x + CUdeviceptr(row0 * spec.k * 2), 0.f, product, true,
                  spec);
      launch(kernel, make_cublas_aux_call(spec, a, CublasPhase::kEpilogue, row0, rows), stream);
    }
    return;
  }
  // The bias or residual goes into y first and cuBLAS adds to it (beta = 1), rounding once; an
  // in-place residual (y is the residual, fp16) is there already.
  const bool adds = spec.epilogue == Epilogue::kBias || spec.epilogue == Epilogue::kResidual;
  const bool in_place = spec.epilogue == Epilogue::kResidual && !spec.out_f32 && a.residual == a.y;
  if (adds && !in_place) launch(kernel, make_cublas_aux_call(spec, a, CublasPhase::kFill, 0, a.m), stream);
  const float beta = adds ? 1.f : 0.f;
  cublas.gemm(stream, spec.n, a.m, spec.k, alpha, w, a.x, beta, a.y, spec.out_f32, spec);
}

}  // namespace onecat::gemm

namespace onecat {

std::string untuned_cublas_config(const Family& family, const std::string& spec, int64_t m) {
  if (family.name() != "gemm" || !gemm::cublas_by_default(gemm::Spec::parse(spec), m)) return "";
  return family.canonical_config(spec, "strategy=cublas");
}

std::string default_config_here(const Family& family, const std::string& spec, int64_t m, int sm) {
  if (std::string cublas = untuned_cublas_config(family, spec, m);
      !cublas.empty() && Cublas::unusable_reason(sm).empty()) {
    return cublas;
  }
  return family.default_config(spec, m, Arch{sm});
}

}  // namespace onecat
