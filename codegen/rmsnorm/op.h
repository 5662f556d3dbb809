// rmsnorm's typed op: out = rmsnorm(x [+ residual]) · weight over `rows` rows of `hidden`
// halves; with residual=1 the sum x + residual is also written back to residual.
#pragma once
#include <cstdint>

#include "codegen/kernel_call.h"
#include "codegen/rmsnorm/config.h"
#include "codegen/rmsnorm/spec.h"

namespace onecat::rmsnorm {

struct Args {
  DevicePtr out = 0, x = 0;
  DevicePtr residual = 0;  // in/out; 0 when the spec has residual=0
  DevicePtr weight = 0;
  float eps = 1e-6f;
  int64_t rows = 0;
};

inline int64_t workspace_bytes(const Spec&, const Config&, int64_t) { return 0; }
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);

}  // namespace onecat::rmsnorm
