#include "codegen/embedding/spec.h"

#include "codegen/spec_text.h"
#include "base/error.h"

namespace onecat::embedding {

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  if (st.family != "embedding") throw InputError("spec " + quoted_input(text) + " is not an embedding spec");
  FieldReader r(st.fields, "spec " + quoted_input(text));
  Spec s;
  s.vocab = static_cast<int>(r.integer("vocab", 1, kMaxVocab));
  s.hidden = static_cast<int>(r.integer("hidden", 1, kMaxHidden));
  r.finish();
  return s;
}

std::string Spec::to_string() const {
  return "embedding:" + join_fields({{"vocab", std::to_string(vocab)}, {"hidden", std::to_string(hidden)}});
}

}  // namespace onecat::embedding
