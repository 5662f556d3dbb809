#include "codegen/rope/spec.h"

#include "codegen/spec_text.h"
#include "base/error.h"

namespace onecat::rope {
namespace {

using attention::KvScale;
using attention::KvType;

std::string_view scale_name(KvScale s) {
  return s == KvScale::kNone ? "none" : s == KvScale::kTensor ? "tensor" : "head";
}

}  // namespace

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  const std::string what = "spec " + quoted_input(text);
  if (st.family != "rope") throw InputError(what + " is not a rope spec");
  FieldReader r(st.fields, what);
  Spec s;
  s.heads = static_cast<int>(r.integer("heads", 1, kMaxHeads));
  s.kv_heads = static_cast<int>(r.integer("kv_heads", 1, kMaxHeads));
  s.dim = static_cast<int>(r.integer("dim", 2, kMaxDim));
  s.qk_norm = r.flag("qk_norm");
  s.paged = r.choice("kv_out", {"dense", "pages"}) == "pages";
  if (s.paged) {
    s.page = static_cast<int>(r.integer("page", 1, attention::kMaxPage));
    const std::string kv = r.choice("kv", {"f16", "e4m3", "e5m2"});
    s.kv = kv == "f16" ? KvType::kF16 : kv == "e4m3" ? KvType::kE4m3 : KvType::kE5m2;
    const std::string scale =
        r.choice_or("kv_scale", s.kv == KvType::kF16 ? "none" : "tensor", {"none", "tensor", "head"});
    s.kv_scale = scale == "none" ? KvScale::kNone : scale == "tensor" ? KvScale::kTensor : KvScale::kHead;
  }
  r.finish();
  if (s.dim % 2 != 0) throw InputError(what + ": dim must be even (rotate-half pairs element i with i + dim/2)");
  if (s.paged && s.kv != KvType::kF16 && s.dim % 4 != 0) {
    throw InputError(what + ": an fp8 cache is written two codes per store or more: dim must be a multiple of 4");
  }
  if ((s.kv == KvType::kF16) != (s.kv_scale == KvScale::kNone)) {
    throw InputError(what + ": kv=f16 takes kv_scale=none, fp8 KV takes kv_scale=tensor or head");
  }
  return s;
}

std::string Spec::to_string() const {
  std::vector<std::pair<std::string, std::string>> f = {{"heads", std::to_string(heads)},
                                                        {"kv_heads", std::to_string(kv_heads)},
                                                        {"dim", std::to_string(dim)},
                                                        {"qk_norm", qk_norm ? "1" : "0"},
                                                        {"kv_out", paged ? "pages" : "dense"}};
  if (paged) {
    f.push_back({"page", std::to_string(page)});
    f.push_back({"kv", std::string(attention::kv_name(kv))});
    f.push_back({"kv_scale", std::string(scale_name(kv_scale))});
  }
  return "rope:" + join_fields(f);
}

}  // namespace onecat::rope
