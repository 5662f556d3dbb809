#include "codegen/sampling/spec.h"

#include "codegen/spec_text.h"
#include "base/error.h"

namespace onecat::sampling {

std::string_view op_name(Op op) { return op == Op::kSample ? "sample" : "argmax"; }

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  if (st.family != "sampling") throw InputError("spec " + quoted_input(text) + " is not a sampling spec");
  FieldReader r(st.fields, "spec " + quoted_input(text));
  Spec s;
  s.op = r.choice("op", {"sample", "argmax"}) == "sample" ? Op::kSample : Op::kArgmax;
  s.vocab = static_cast<int>(r.integer("vocab", 1, kMaxVocab));
  if (s.op == Op::kSample) s.logprobs = static_cast<int>(r.integer_or("logprobs", 0, 0, kMaxLogprobs));
  r.finish();
  return s;
}

std::string Spec::to_string() const {
  std::vector<std::pair<std::string, std::string>> fields = {{"op", std::string(op_name(op))},
                                                             {"vocab", std::to_string(vocab)}};
  if (op == Op::kSample) fields.push_back({"logprobs", std::to_string(logprobs)});
  return "sampling:" + join_fields(fields);
}

}  // namespace onecat::sampling
