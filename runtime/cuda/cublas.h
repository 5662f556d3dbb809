// cuBLAS, loaded with dlopen: the trusted GPU reference and speed peer for the GEMM
// families. Absent cuBLAS is not an error until a caller needs it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/dynlib.h"

namespace onecat {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;

// Why a cuBLAS of `version` (e.g. 130000) has no kernels for compute capability `sm`, or empty:
// CUDA 13 dropped sm_70 and sm_72.
std::string cublas_arch_gap(int version, int sm);

class Cublas {
 public:
  // The loaded library, or nullptr with unavailable_reason() set; never throws.
  static Cublas* find();
  static Cublas& require();
  static std::string unavailable_reason();
  // Why this process's cuBLAS cannot run on a GPU of compute capability `sm` (not found, or a
  // CUDA 13 cuBLAS on a Volta, whose kernels CUDA 13 dropped), or empty.
  static std::string unusable_reason(int sm);

  const std::string& path() const { return path_; }
  int version() const { return version_; }  // e.g. 130000
  void check(cublasStatus_t status, const char* function, const std::string& context) const;

  // cuBLAS's recommendation for Hopper; a caller-owned workspace of this size serves every GEMM here.
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  // Puts `handle` on `stream` and then on `workspace` (setting a stream puts cuBLAS back on its own
  // pool, which a CUDA graph capture must not allocate from); the first failing status, else 0.
  cublasStatus_t use_stream(cublasHandle_t handle, CUstream stream, const DeviceBuffer& workspace) const;
  // y[rows][n] = alpha · x[rows][k] · W[n][k]ᵀ + beta · y: fp16 W and x, fp32 accumulation, y fp16
  // or fp32 (cublasGemmEx column-major: op(W) = T, op(x) = N); its status.
  cublasStatus_t gemm_xwt(cublasHandle_t handle, int64_t n, int64_t rows, int64_t k, float alpha, CUdeviceptr w,
                          CUdeviceptr x, float beta, CUdeviceptr y, bool y_f32) const;

  cublasStatus_t (*cublasCreate)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*cublasDestroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*cublasGetVersion)(cublasHandle_t, int*) = nullptr;
  cublasStatus_t (*cublasSetStream)(cublasHandle_t, CUstream) = nullptr;
  // A caller-owned workspace: no allocation inside a CUDA graph capture.
  cublasStatus_t (*cublasSetWorkspace)(cublasHandle_t, void*, size_t) = nullptr;
  // cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
  //              beta, C, Ctype, ldc, computeType, algo)
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, int, int, int, int, int, const void*, const void*, int, int,
                                 const void*, int, int, const void*, void*, int, int, int, int) = nullptr;

 private:
  Cublas() = default;
  DynLib lib_;
  std::string path_;
  int version_ = 0;
};

}  // namespace onecat
