// The sampling family, gathered for the registry.
#pragma once
#include "codegen/family.h"
#include "codegen/sampling/emit.h"
#include "codegen/sampling/space.h"

namespace onecat::sampling {

struct Traits {
  using Spec = sampling::Spec;
  using Config = sampling::Config;
  static constexpr std::string_view kName = "sampling";
  static constexpr int kGeneratorVersion = sampling::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return sampling::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m) { return sampling::default_config(s, m); }
  static std::vector<Config> candidate_configs(const Spec& s) { return sampling::candidate_configs(s); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return sampling::fits_bucket(s, c, m); }
};

}  // namespace onecat::sampling
