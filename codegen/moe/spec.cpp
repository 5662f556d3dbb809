#include "codegen/moe/spec.h"

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::moe {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kRoute: return "route";
    case Op::kGateUp: return "gate_up";
    case Op::kDown: return "down";
    case Op::kCombine: return "combine";
    case Op::kDecode:
      return "decode";
  }
  return "route";
}

gemm::Spec Spec::projection() const { return projection(op); }

gemm::Spec Spec::projection(Op which) const {
  gemm::Spec g;
  const bool gated = which == Op::kGateUp;
  g.n = gated ? 2 * inter : hidden;
  g.k = gated ? hidden : inter;
  g.format = format;
  g.group = group;
  g.out_f32 = !gated;
  g.epilogue = gated ? gemm::Epilogue::kSiluMul : gemm::Epilogue::kNone;
  g.act_order = act_order;
  return g;
}

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  const std::string what = "spec " + quoted_input(text);
  if (st.family != "moe") throw InputError(what + " is not a moe spec");
  FieldReader r(st.fields, what);
  Spec s;
  std::string fmt, group, act_order;
  const std::string op = r.choice("op", {"route", "gate_up", "down", "combine", "decode"});
  s.op = op == "route"     ? Op::kRoute
         : op == "gate_up" ? Op::kGateUp
         : op == "down"    ? Op::kDown
         : op == "combine" ? Op::kCombine
                           : Op::kDecode;
  if (s.op != Op::kCombine) s.experts = static_cast<int>(r.integer("experts", 1, kMaxExperts));
  s.topk = static_cast<int>(r.integer("topk", 1, kMaxTopk));
  if (s.routes()) {
    s.norm = r.flag("norm");
    if (r.has("score")) s.sigmoid = r.choice("score", {"softmax", "sigmoid"}) == "sigmoid";
    if (r.has("bias")) s.bias = r.flag("bias");
    if (r.has("groups")) s.groups = static_cast<int>(r.integer("groups", 1, kMaxGroups));
    s.topk_groups = r.has("topk_groups") ? static_cast<int>(r.integer("topk_groups", 1, kMaxGroups)) : s.groups;
  }
  if (s.op != Op::kRoute) s.hidden = r.integer("hidden", 1, kMaxDim);
  if (s.projects()) s.inter = r.integer("inter", 1, kMaxDim);
  if (s.combines() && r.has("shared")) {
    const std::string sh = r.choice("shared", {"none", "plain", "gated"});
    s.shared = sh == "plain" ? Spec::Shared::kPlain : sh == "gated" ? Spec::Shared::kGated : Spec::Shared::kNone;
  }
  if (s.projects()) {
    // The projection's weight fields are the gemm family's, checked by its parser below.
    fmt = r.choice("fmt", {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"});
    if (r.has("group")) group = std::to_string(r.integer("group", 0, 128));
    if (r.has("act_order")) act_order = std::to_string(r.integer("act_order", 0, 1));
  }
  r.finish();
  if (s.op != Op::kCombine && s.topk > s.experts) {
    throw InputError(what + ": topk=" + std::to_string(s.topk) + " exceeds experts=" + std::to_string(s.experts));
  }
  if (s.routes()) {
    if (!s.sigmoid && (s.bias || s.groups > 1 || s.topk_groups != s.groups)) {
      throw InputError(what + ": bias, groups and topk_groups need score=sigmoid");
    }
    if (s.experts % s.groups != 0) {
      throw InputError(what + ": groups=" + std::to_string(s.groups) + " does not divide experts=" +
                       std::to_string(s.experts));
    }
    if (s.groups > 1 && s.experts / s.groups < 2) {
      throw InputError(what + ": a group is rated by its two best experts, so groups need 2 experts or more");
    }
    if (s.topk_groups > s.groups) {
      throw InputError(what + ": topk_groups=" + std::to_string(s.topk_groups) + " exceeds groups=" +
                       std::to_string(s.groups));
    }
    if (int64_t(s.topk_groups) * (s.experts / s.groups) < s.topk) {
      throw InputError(what + ": the " + std::to_string(s.topk_groups) + " chosen groups hold fewer than topk=" +
                       std::to_string(s.topk) + " experts");
    }
  }
  // Each projection's weight fields, checked by the gemm family's parser (decode: both).
  for (const Op which : {Op::kGateUp, Op::kDown}) {
    if (s.op != which && s.op != Op::kDecode) continue;
    const bool gated = which == Op::kGateUp;
    std::string text = "gemm:n=" + std::to_string(gated ? 2 * s.inter : s.hidden) +
                       ",k=" + std::to_string(gated ? s.hidden : s.inter) + ",fmt=" + fmt;
    if (!group.empty()) text += ",group=" + group;
    if (!act_order.empty()) text += ",act_order=" + act_order;
    try {
      const gemm::Spec g = gemm::Spec::parse(text);
      s.format = g.format, s.group = g.group, s.act_order = g.act_order;
    } catch (const InputError& e) {
      throw InputError(what + ": its " + std::string(op_name(which)) + " projection (" + text + "): " + e.what());
    }
  }
  return s;
}

std::string Spec::to_string() const {
  std::vector<std::pair<std::string, std::string>> f{{"op", std::string(op_name(op))}};
  if (op != Op::kCombine) f.push_back({"experts", std::to_string(experts)});
  f.push_back({"topk", std::to_string(topk)});
  if (routes()) f.push_back({"norm", norm ? "1" : "0"});
  if (routes() && sigmoid) {
    // Only the sigmoid router prints these: softmax specs keep their text (and cache keys).
    f.push_back({"score", "sigmoid"});
    f.push_back({"bias", bias ? "1" : "0"});
    f.push_back({"groups", std::to_string(groups)});
    f.push_back({"topk_groups", std::to_string(topk_groups)});
  }
  if (op != Op::kRoute) f.push_back({"hidden", std::to_string(hidden)});
  if (projects()) f.push_back({"inter", std::to_string(inter)});
  if (combines() && shared != Shared::kNone) f.push_back({"shared", shared == Shared::kPlain ? "plain" : "gated"});
  if (projects()) {
    f.push_back({"fmt", std::string(quant::format_name(format))});
    f.push_back({"group", std::to_string(group)});
    f.push_back({"act_order", act_order ? "1" : "0"});
  }
  return "moe:" + join_fields(f);
}

}  // namespace onecat::moe
