#include "codegen/rmsnorm/spec.h"

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::rmsnorm {

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  if (st.family != "rmsnorm") throw InputError("spec " + quoted_input(text) + " is not an rmsnorm spec");
  FieldReader r(st.fields, "spec " + quoted_input(text));
  Spec s;
  s.hidden = static_cast<int>(r.integer("hidden", 1, kMaxHidden));
  // Volta has no bf16 arithmetic: bf16 checkpoints become fp16 at load (VOLTA.md).
  r.choice("dtype", {"f16"});
  s.residual = r.flag("residual");
  r.finish();
  if (s.hidden % 2 == 1 && s.hidden > kMaxOddHidden) {
    throw InputError("spec " + quoted_input(text) + ": an odd hidden size must be at most " + std::to_string(kMaxOddHidden) +
                     " (its row is read one value per load and held in registers)");
  }
  return s;
}

std::string Spec::to_string() const {
  return "rmsnorm:" + join_fields({{"hidden", std::to_string(hidden)}, {"dtype", "f16"}, {"residual", residual ? "1" : "0"}});
}

}  // namespace onecat::rmsnorm
