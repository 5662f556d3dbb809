#include "codegen/sampling/op.h"

#include "codegen/sampling/emit.h"
#include "base/error.h"

namespace onecat::sampling {

int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t rows) {
  if (spec.op != Op::kArgmax || config.split == 1) return 0;
  return rows * config.split * 8 + rows * 4;
}

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  if (spec.op != Op::kSample) throw InputError(spec.to_string() + " takes ArgmaxArgs, not sample Args");
  KernelCall call;
  call.geometry = geometry(spec, config, a.rows);
  call.arg(a.tokens).arg(a.token_logprobs).arg(a.top_ids).arg(a.top_logprobs).arg(a.logits).arg(a.params);
  call.arg(a.history_offsets).arg(a.history_ids).arg(a.history_table);
  return call;
}

KernelCall make_call(const Spec& spec, const Config& config, const ArgmaxArgs& a) {
  if (spec.op != Op::kArgmax) throw InputError(spec.to_string() + " takes sample Args, not ArgmaxArgs");
  KernelCall call;
  call.geometry = geometry(spec, config, a.rows);
  const DevicePtr partials = config.split > 1 ? a.workspace : 0;
  const DevicePtr counters = config.split > 1 ? a.workspace + DevicePtr(a.rows * config.split * 8) : 0;
  call.arg(a.tokens).arg(a.logits).arg(partials).arg(counters);
  return call;
}

}  // namespace onecat::sampling
