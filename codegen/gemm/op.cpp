#include "codegen/gemm/op.h"

#include "codegen/gemm/emit.h"

namespace onecat::gemm {

int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t m) {
  return 4 * (workspace_floats(spec, config, m) + workspace_counters(spec, config, m));
}

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  KernelCall call;
  call.geometry = geometry(spec, config, a.m);
  call.arg(a.y).arg(a.x).arg(a.qweight).arg(a.scales).arg(a.zeros).arg(a.perm).arg(a.global_scale);
  call.arg(spec.epilogue == Epilogue::kBias ? a.bias : DevicePtr(0));
  call.arg(spec.epilogue == Epilogue::kResidual ? a.residual : DevicePtr(0));
  call.arg(int(a.m)).arg(a.partial).arg(a.counters);
  return call;
}

}  // namespace onecat::gemm
