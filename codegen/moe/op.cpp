#include "codegen/moe/op.h"

#include "codegen/moe/emit.h"

namespace onecat::moe {

int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t tokens) {
  if (spec.op == Op::kDecode) return 4 * (8 * tokens * spec.topk + tokens * config.decode_blocks(spec, Op::kDown));
  if (spec.op != Op::kRoute || config.route_ctas(tokens) <= 1) return 0;
  return 16 + 4 * (config.route_ctas(tokens) * spec.experts + tokens * spec.topk);
}

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  KernelCall call;
  call.geometry = geometry(spec, config, a.tokens);
  switch (spec.op) {
    case Op::kRoute:
      call.arg(a.ids).arg(a.weights).arg(a.offsets).arg(a.sorted).arg(a.logits).arg(int(a.tokens))
          .arg(spec.bias ? a.bias : DevicePtr(0)).arg(a.scale).arg(a.workspace);
      break;
    case Op::kGateUp:
    case Op::kDown: {
      const bool gated = spec.op == Op::kGateUp;
      call.arg(gated ? a.h : a.y).arg(gated ? a.x : a.h).arg(a.qweight).arg(a.scales).arg(a.zeros)
          .arg(spec.act_order ? a.perm : DevicePtr(0)).arg(a.global_scales).arg(a.offsets).arg(a.sorted)
          .arg(a.slot).arg(static_cast<long long>(a.qweight_stride)).arg(static_cast<long long>(a.scales_stride))
          .arg(static_cast<long long>(a.zeros_stride));
      break;
    }
    case Op::kDecode:
      call.arg(a.out)
          .arg(a.x)
          .arg(a.logits)
          .arg(int(a.tokens))
          .arg(spec.bias ? a.bias : DevicePtr(0))
          .arg(a.scale)
          .arg(a.qweight)
          .arg(a.scales)
          .arg(a.zeros)
          .arg(spec.act_order ? a.perm : DevicePtr(0))
          .arg(a.global_scales)
          .arg(static_cast<long long>(a.qweight_stride))
          .arg(static_cast<long long>(a.scales_stride))
          .arg(static_cast<long long>(a.zeros_stride))
          .arg(a.down_qweight)
          .arg(a.down_scales)
          .arg(a.down_zeros)
          .arg(spec.act_order ? a.down_perm : DevicePtr(0))
          .arg(a.down_global_scales)
          .arg(static_cast<long long>(a.down_qweight_stride))
          .arg(static_cast<long long>(a.down_scales_stride))
          .arg(static_cast<long long>(a.down_zeros_stride))
          .arg(a.h)
          .arg(a.y)
          .arg(spec.shared != Spec::Shared::kNone ? a.shared : DevicePtr(0))
          .arg(spec.shared == Spec::Shared::kGated ? a.shared_gate : DevicePtr(0))
          .arg(a.ids)
          .arg(a.weights)
          .arg(a.workspace);
      break;
    case Op::kCombine:
      call.arg(a.out).arg(a.y).arg(a.weights).arg(int(a.tokens))
          .arg(spec.shared != Spec::Shared::kNone ? a.shared : DevicePtr(0))
          .arg(spec.shared == Spec::Shared::kGated ? a.shared_gate : DevicePtr(0));
      break;
  }
  return call;
}

}  // namespace onecat::moe
