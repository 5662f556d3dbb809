#include "base/error.h"
#include "codegen/attention/family.h"
#include "codegen/embedding/family.h"
#include "codegen/gemm/family.h"
#include "codegen/moe/family.h"
#include "codegen/rmsnorm/family.h"
#include "codegen/rope/family.h"
#include "codegen/sampling/family.h"
#include "codegen/spec_text.h"

namespace onecat {

std::vector<const Family*> all_families() {
  static const TypedFamily<rmsnorm::Traits> rmsnorm_family;
  static const TypedFamily<gemm::Traits> gemm_family;
  static const TypedFamily<attention::Traits> attention_family;
  static const TypedFamily<embedding::Traits> embedding_family;
  static const TypedFamily<rope::Traits> rope_family;
  static const TypedFamily<sampling::Traits> sampling_family;
  static const TypedFamily<moe::Traits> moe_family;
  return {&rmsnorm_family, &gemm_family, &attention_family, &embedding_family, &rope_family, &sampling_family, &moe_family};
}

const Family* find_family(std::string_view name) {
  for (const Family* f : all_families()) {
    if (f->name() == name) return f;
  }
  return nullptr;
}

std::string family_names() {
  std::string names;
  for (const Family* f : all_families()) names += (names.empty() ? "" : ", ") + std::string(f->name());
  return names;
}

const Family& family_of(std::string_view spec) {
  const std::string family = split_spec(spec).family;
  if (const Family* f = find_family(family)) return *f;
  throw InputError("spec " + quoted_input(spec) + ": unknown kernel family " + quoted_input(family) + " (known: " +
                   family_names() + ")");
}

}  // namespace onecat
