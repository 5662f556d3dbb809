#include "codegen/rope/op.h"

#include "codegen/rope/emit.h"

namespace onecat::rope {

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  const bool fp8 = spec.paged && spec.kv != attention::KvType::kF16;
  KernelCall call;
  call.geometry = geometry(spec, config, a.tokens);
  call.arg(a.qkv).arg(a.positions).arg(a.inv_freq).arg(a.attention_factor);
  call.arg(spec.qk_norm ? a.q_norm : DevicePtr(0)).arg(spec.qk_norm ? a.k_norm : DevicePtr(0)).arg(a.eps);
  call.arg(a.q).arg(a.k).arg(a.v).arg(spec.paged ? a.slot_mapping : DevicePtr(0));
  call.arg(fp8 ? a.k_scale : DevicePtr(0)).arg(fp8 ? a.v_scale : DevicePtr(0)).arg(int(a.tokens));
  call.arg(int(a.positions_from_host));
  return call;
}

}  // namespace onecat::rope
