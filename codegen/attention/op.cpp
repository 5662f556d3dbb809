#include "codegen/attention/op.h"

#include "codegen/attention/emit.h"

namespace onecat::attention {

int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t batch) {
  return 4 * (workspace_floats(spec, config, batch) + workspace_counters(spec, config, batch));
}

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  const bool fp8 = spec.kv != KvType::kF16;
  KernelCall call;
  call.geometry = geometry(spec, config, a.batch, spec.op == Op::kPrefill ? a.max_q : 0);
  call.arg(a.out).arg(a.q).arg(a.k_cache).arg(a.v_cache);
  call.arg(fp8 ? a.k_scale : DevicePtr(0)).arg(fp8 ? a.v_scale : DevicePtr(0));
  call.arg(a.block_table).arg(a.max_pages).arg(a.seq_lens);
  call.arg(spec.op == Op::kPrefill ? a.cu_q : DevicePtr(0)).arg(a.sm_scale).arg(a.partial).arg(a.counters);
  call.arg(int(a.tables_from_host));
  return call;
}

KernelCall make_call(const Spec& spec, const Config& config, const KvWriteArgs& a) {
  const bool fp8 = spec.kv != KvType::kF16;
  KernelCall call;
  call.geometry = geometry(spec, config, a.tokens);
  call.arg(a.k_cache).arg(a.v_cache).arg(a.k).arg(a.v).arg(a.slot_mapping);
  call.arg(fp8 ? a.k_scale : DevicePtr(0)).arg(fp8 ? a.v_scale : DevicePtr(0)).arg(int(a.tokens));
  return call;
}

}  // namespace onecat::attention
