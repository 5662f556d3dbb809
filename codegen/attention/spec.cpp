#include "codegen/attention/spec.h"

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::attention {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kPrefill: return "prefill";
    case Op::kDecode: return "decode";
    case Op::kVerify: return "verify";
    case Op::kKvWrite: return "kv_write";
  }
  return "?";
}

std::string_view kv_name(KvType kv) {
  switch (kv) {
    case KvType::kF16: return "f16";
    case KvType::kE4m3: return "e4m3";
    case KvType::kE5m2: return "e5m2";
  }
  return "?";
}

namespace {

std::string_view scale_name(KvScale s) {
  switch (s) {
    case KvScale::kNone: return "none";
    case KvScale::kTensor: return "tensor";
    case KvScale::kHead: return "head";
  }
  return "?";
}

}  // namespace

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  const std::string what = "spec " + quoted_input(text);
  if (st.family != "attention") throw InputError(what + " is not an attention spec");
  FieldReader r(st.fields, what);
  Spec s;
  const std::string op = r.choice("op", {"prefill", "decode", "verify", "kv_write"});
  s.op = op == "prefill" ? Op::kPrefill : op == "decode" ? Op::kDecode : op == "verify" ? Op::kVerify : Op::kKvWrite;
  if (s.op != Op::kKvWrite) s.heads = static_cast<int>(r.integer("heads", 1, kMaxHeads));
  s.kv_heads = static_cast<int>(r.integer("kv_heads", 1, kMaxHeads));
  s.dim = static_cast<int>(r.integer("dim", 1, 1024));
  s.page = static_cast<int>(r.integer("page", 1, kMaxPage));
  const std::string kv = r.choice("kv", {"f16", "e4m3", "e5m2"});
  s.kv = kv == "f16" ? KvType::kF16 : kv == "e4m3" ? KvType::kE4m3 : KvType::kE5m2;
  const std::string scale = r.choice_or("kv_scale", s.kv == KvType::kF16 ? "none" : "tensor", {"none", "tensor", "head"});
  s.kv_scale = scale == "none" ? KvScale::kNone : scale == "tensor" ? KvScale::kTensor : KvScale::kHead;
  if (s.op == Op::kPrefill) s.causal = r.integer_or("causal", 1, 0, 1) == 1;
  if (s.op == Op::kVerify) s.q = static_cast<int>(r.integer("q", 2, kMaxVerifyTokens));
  if (s.op != Op::kKvWrite) s.window = static_cast<int>(r.integer_or("window", 0, 0, kMaxWindow));
  r.finish();
  if (s.dim != 64 && s.dim != 128 && s.dim != 256) throw InputError(what + ": dim must be 64, 128 or 256");
  if (s.op != Op::kKvWrite) {
    if (s.heads % s.kv_heads != 0) {
      throw InputError(what + ": heads=" + std::to_string(s.heads) + " is not a multiple of kv_heads=" +
                       std::to_string(s.kv_heads));
    }
    if (s.group() > kMaxGroup) throw InputError(what + ": more than " + std::to_string(kMaxGroup) + " query heads per KV head");
  }
  if ((s.kv == KvType::kF16) != (s.kv_scale == KvScale::kNone)) {
    throw InputError(what + ": kv=f16 takes kv_scale=none, fp8 KV takes kv_scale=tensor or head");
  }
  if (s.window > 0 && !s.causal) throw InputError(what + ": a sliding window needs causal=1");
  return s;
}

std::string Spec::to_string() const {
  std::vector<std::pair<std::string, std::string>> f = {{"op", std::string(op_name(op))}};
  if (op != Op::kKvWrite) f.push_back({"heads", std::to_string(heads)});
  f.push_back({"kv_heads", std::to_string(kv_heads)});
  f.push_back({"dim", std::to_string(dim)});
  f.push_back({"page", std::to_string(page)});
  f.push_back({"kv", std::string(kv_name(kv))});
  f.push_back({"kv_scale", std::string(scale_name(kv_scale))});
  if (op == Op::kPrefill) f.push_back({"causal", causal ? "1" : "0"});
  if (op == Op::kVerify) f.push_back({"q", std::to_string(q)});
  if (op != Op::kKvWrite) f.push_back({"window", std::to_string(window)});
  return "attention:" + join_fields(f);
}

}  // namespace onecat::attention
