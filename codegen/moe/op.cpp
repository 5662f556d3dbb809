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
  // A projection's weights as the kernels take them: the buffers, then (after what the op puts
  // between) the strides.
  auto weight_buffers = [&](const ExpertWeights& w) {
    call.arg(w.qweight).arg(w.scales).arg(w.zeros).arg(spec.act_order ? w.perm : DevicePtr(0)).arg(w.global_scales);
  };
  auto weight_strides = [&](const ExpertWeights& w) {
    call.arg(static_cast<long long>(w.qweight_stride))
        .arg(static_cast<long long>(w.scales_stride))
        .arg(static_cast<long long>(w.zeros_stride));
  };
  switch (spec.op) {
    case Op::kRoute:
      call.arg(a.ids).arg(a.weights).arg(a.offsets).arg(a.sorted).arg(a.logits).arg(int(a.tokens))
          .arg(spec.bias ? a.bias : DevicePtr(0)).arg(a.scale).arg(a.workspace);
      break;
    case Op::kGateUp:
    case Op::kDown: {
      const bool gated = spec.op == Op::kGateUp;
      call.arg(gated ? a.h : a.y).arg(gated ? a.x : a.h);
      weight_buffers(a.experts);
      call.arg(a.offsets).arg(a.sorted).arg(a.slot);
      weight_strides(a.experts);
      break;
    }
    case Op::kDecode:
      call.arg(a.out).arg(a.x).arg(a.logits).arg(int(a.tokens)).arg(spec.bias ? a.bias : DevicePtr(0)).arg(a.scale);
      weight_buffers(a.experts);
      weight_strides(a.experts);
      weight_buffers(a.down);
      weight_strides(a.down);
      call.arg(a.h)
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
