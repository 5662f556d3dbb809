#include "codegen/rmsnorm/op.h"

#include "codegen/rmsnorm/emit.h"

namespace onecat::rmsnorm {

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  KernelCall call;
  call.geometry = geometry(spec, config, a.rows);
  call.arg(a.out).arg(a.x).arg(spec.residual ? a.residual : DevicePtr(0)).arg(a.weight).arg(a.eps).arg(int(a.rows));
  return call;
}

}  // namespace onecat::rmsnorm
