// The attention family, gathered for the registry.
#pragma once
#include "codegen/attention/emit.h"
#include "codegen/attention/space.h"
#include "codegen/family.h"

namespace onecat::attention {

struct Traits {
  using Spec = attention::Spec;
  using Config = attention::Config;
  static constexpr std::string_view kName = "attention";
  static constexpr int kGeneratorVersion = attention::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return attention::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m, Arch a) { return attention::default_config(s, m, a); }
  static std::vector<Config> candidate_configs(const Spec& s, Arch a) { return attention::candidate_configs(s, a); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return attention::fits_bucket(s, c, m); }
};

}  // namespace onecat::attention
