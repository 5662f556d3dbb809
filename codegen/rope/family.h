// The rope family, gathered for the registry.
#pragma once
#include "codegen/family.h"
#include "codegen/rope/emit.h"
#include "codegen/rope/space.h"

namespace onecat::rope {

struct Traits {
  using Spec = rope::Spec;
  using Config = rope::Config;
  static constexpr std::string_view kName = "rope";
  static constexpr int kGeneratorVersion = rope::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return rope::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m) { return rope::default_config(s, m); }
  static std::vector<Config> candidate_configs(const Spec& s) { return rope::candidate_configs(s); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return rope::fits_bucket(s, c, m); }
};

}  // namespace onecat::rope
