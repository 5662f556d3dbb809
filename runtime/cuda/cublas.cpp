#include "runtime/cuda/cublas.h"

#include "base/error.h"
#include "runtime/cuda/venv.h"

namespace onecat {
namespace {

std::string& unavailable_message() {
  static std::string message;
  return message;
}

}  // namespace

Cublas* Cublas::find() {
  static Cublas* cublas = [] {
    auto* c = new Cublas();
    std::string tried;
    // CUDA 12's first: it still runs on a V100 (CUDA 13's does not), and on every later GPU. The
    // pinned wheel in the project's venv (scripts/setup), then the system's.
    std::vector<std::string> names = venv_files(project_venv(), "nvidia/cublas/lib/libcublas.so.12");
    for (const char* name :
         {"libcublas.so.12", "libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so"}) {
      names.emplace_back(name);
    }
    for (const std::string& name : names) {
      c->lib_ = DynLib::open(name);
      if (c->lib_) break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!c->lib_) {
      unavailable_message() = "cuBLAS not found (tried " + tried + "); install the CUDA toolkit's cuBLAS to compare against it";
      delete c;
      return static_cast<Cublas*>(nullptr);
    }
    try {
      c->lib_.bind(c->cublasCreate, "cublasCreate_v2");
      c->lib_.bind(c->cublasDestroy, "cublasDestroy_v2");
      c->lib_.bind(c->cublasGetVersion, "cublasGetVersion_v2");
      c->lib_.bind(c->cublasSetStream, "cublasSetStream_v2");
      c->lib_.bind(c->cublasSetWorkspace, "cublasSetWorkspace_v2");
      c->lib_.bind(c->cublasGemmEx, "cublasGemmEx");
      int (*get_property)(int, int*) = nullptr;
      c->lib_.bind(get_property, "cublasGetProperty");
      int major = 0, minor = 0, patch = 0;
      get_property(0, &major), get_property(1, &minor), get_property(2, &patch);
      c->version_ = major * 10000 + minor * 100 + patch;
    } catch (const Error& e) {
      unavailable_message() = e.what();
      delete c;
      return static_cast<Cublas*>(nullptr);
    }
    c->path_ = c->lib_.path();
    return c;
  }();
  return cublas;
}

Cublas& Cublas::require() {
  Cublas* c = find();
  if (!c) throw Error(unavailable_message());
  return *c;
}

std::string Cublas::unavailable_reason() { return find() ? "" : unavailable_message(); }

std::string cublas_arch_gap(int version, int sm) {
  if (version < 130000 || sm >= 75) return "";
  return "cuBLAS " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         " has no kernels for sm_" + std::to_string(sm) +
         " (CUDA 13 dropped Volta); install CUDA 12's cuBLAS (libcublas.so.12)";
}

std::string Cublas::unusable_reason(int sm) {
  Cublas* c = find();
  if (!c) return unavailable_message();
  const std::string gap = cublas_arch_gap(c->version(), sm);
  return gap.empty() ? "" : gap + " instead of " + c->path();
}

namespace {
constexpr int kOpN = 0, kOpT = 1, kR32F = 0, kR16F = 2, kCompute32F = 68, kGemmDefault = -1;
}  // namespace

cublasStatus_t Cublas::use_stream(cublasHandle_t handle, CUstream stream, const DeviceBuffer& workspace) const {
  if (cublasStatus_t s = cublasSetStream(handle, stream)) return s;
  return cublasSetWorkspace(handle, reinterpret_cast<void*>(workspace.ptr()), workspace.bytes());
}

cublasStatus_t Cublas::gemm_xwt(cublasHandle_t handle, int64_t n, int64_t rows, int64_t k, float alpha, CUdeviceptr w,
                                CUdeviceptr x, float beta, CUdeviceptr y, bool y_f32) const {
  return cublasGemmEx(handle, kOpT, kOpN, int(n), int(rows), int(k), &alpha, reinterpret_cast<const void*>(w), kR16F,
                      int(k), reinterpret_cast<const void*>(x), kR16F, int(k), &beta, reinterpret_cast<void*>(y),
                      y_f32 ? kR32F : kR16F, int(n), kCompute32F, kGemmDefault);
}

void Cublas::check(cublasStatus_t status, const char* function, const std::string& context) const {
  if (status == 0) return;
  throw Error(std::string(function) + " failed: cuBLAS status " + std::to_string(status) + " while " + context);
}

}  // namespace onecat
