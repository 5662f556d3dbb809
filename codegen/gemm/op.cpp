#include "codegen/gemm/op.h"

#include <algorithm>

#include "base/error.h"
#include "codegen/gemm/emit.h"

namespace onecat::gemm {

int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t m) {
  return 4 * (workspace_floats(spec, config, m) + workspace_counters(spec, config, m));
}

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  if (config.strategy == Strategy::kCublas) {
    throw InputError(
        "gemm config strategy=cublas is not one kernel launch: launch it through gemm::launch_op "
        "(runtime/engine/gemm_launch.h)");
  }
  KernelCall call;
  call.geometry = geometry(spec, config, a.m);
  call.arg(a.y).arg(a.x).arg(a.qweight).arg(a.scales).arg(a.zeros).arg(a.perm).arg(a.global_scale);
  call.arg(spec.epilogue == Epilogue::kBias ? a.bias : DevicePtr(0));
  call.arg(spec.epilogue == Epilogue::kResidual ? a.residual : DevicePtr(0));
  call.arg(int(a.m));
  // gemv takes the norm's weight and eps where the others take the split-K workspace.
  if (config.strategy == Strategy::kGemv) {
    if (spec.norm && !a.norm_weight) throw InputError("gemm " + spec.to_string() + " needs the norm's weight");
    call.arg(spec.norm ? a.norm_weight : DevicePtr(0)).arg(a.norm_eps);
  } else {
    call.arg(a.partial).arg(a.counters);
  }
  return call;
}

namespace {
constexpr int64_t kScratchAlign = 256;
int64_t aligned(int64_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }
}  // namespace

int64_t cublas_product_offset(const Spec& spec) {
  return spec.format == WeightFormat::kF16 ? 0 : aligned(spec.n * spec.k * 2);
}

int64_t scratch_bytes(const Spec& spec, const Config& config, int64_t m) {
  if (config.strategy != Strategy::kCublas) return 0;
  const int64_t product = spec.epilogue == Epilogue::kSiluMul ? std::min(m, kCublasRows) * spec.n * 4 : 0;
  return cublas_product_offset(spec) + aligned(product);
}

KernelCall make_cublas_aux_call(const Spec& spec, const Args& a, CublasPhase phase, int64_t row0, int64_t rows) {
  KernelCall call;
  call.geometry = cublas_aux_geometry(spec, phase, rows);
  const int64_t out_bytes = spec.out_f32 ? 4 : 2;
  const DevicePtr product =
      spec.epilogue == Epilogue::kSiluMul ? a.scratch + DevicePtr(cublas_product_offset(spec)) : 0;
  call.arg(int(phase)).arg(a.y + DevicePtr(row0 * spec.out_cols() * out_bytes)).arg(product).arg(a.scratch);
  call.arg(a.qweight).arg(a.scales).arg(a.zeros);
  call.arg(spec.epilogue == Epilogue::kBias ? a.bias : DevicePtr(0));
  call.arg(spec.epilogue == Epilogue::kResidual ? a.residual + DevicePtr(row0 * spec.out_cols() * 2) : DevicePtr(0));
  call.arg(int(rows));
  return call;
}

}  // namespace onecat::gemm
