#include "runtime/engine/gemm_launch.h"

#include <algorithm>
#include <mutex>

#include "base/error.h"
#include "runtime/cuda/cublas.h"

namespace onecat::gemm {
namespace {

constexpr int kOpN = 0, kOpT = 1, kR32F = 0, kR16F = 2, kCompute32F = 68, kGemmDefault = -1;
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;  // cuBLAS's recommendation for Hopper

// One handle for the process (onecat drives one GPU per process: Session::use_gpu), its
// workspace given explicitly so that a captured GEMM allocates nothing. Never destroyed: the
// driver may be gone at exit.
class CublasGemm {
 public:
  static CublasGemm& get() {
    static CublasGemm* g = new CublasGemm();
    return *g;
  }
  // y (ldc = n) ← alpha · x · Wᵀ + beta · y for `rows` tokens, W [n][k] fp16, x [rows][k] fp16.
  void gemm(CUstream stream, int64_t n, int64_t rows, int64_t k, float alpha, CUdeviceptr w, CUdeviceptr x, float beta,
            CUdeviceptr y, bool y_f32, const Spec& spec) {
    std::lock_guard<std::mutex> lock(mutex_);
    cublas_.check(cublas_.cublasSetStream(handle_, stream), "cublasSetStream",
                  "choosing the stream of " + spec.to_string());
    // After the stream: setting one puts cuBLAS back on its own workspace pool.
    cublas_.check(cublas_.cublasSetWorkspace(handle_, reinterpret_cast<void*>(workspace_.ptr()), workspace_.bytes()),
                  "cublasSetWorkspace", "giving cuBLAS its workspace for " + spec.to_string());
    cublas_.check(
        cublas_.cublasGemmEx(handle_, kOpT, kOpN, int(n), int(rows), int(k), &alpha, reinterpret_cast<const void*>(w),
                             kR16F, int(k), reinterpret_cast<const void*>(x), kR16F, int(k), &beta,
                             reinterpret_cast<void*>(y), y_f32 ? kR32F : kR16F, int(n), kCompute32F, kGemmDefault),
        "cublasGemmEx", "running " + spec.to_string() + " with strategy=cublas");
  }

 private:
  CublasGemm() : cublas_(Cublas::require()), workspace_(kCublasWorkspaceBytes) {
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
  float beta = 0.f;
  const bool in_place = spec.epilogue == Epilogue::kResidual && !spec.out_f32 && a.residual == a.y;
  if (spec.epilogue == Epilogue::kBias || (spec.epilogue == Epilogue::kResidual && !in_place)) {
    launch(kernel, make_cublas_aux_call(spec, a, CublasPhase::kFill, 0, a.m), stream);
  }
  if (spec.epilogue == Epilogue::kBias || spec.epilogue == Epilogue::kResidual) beta = 1.f;
  cublas.gemm(stream, spec.n, a.m, spec.k, alpha, w, a.x, beta, a.y, spec.out_f32, spec);
}

}  // namespace onecat::gemm
