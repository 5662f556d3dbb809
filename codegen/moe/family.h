// The moe family, gathered for the registry.
#pragma once
#include "codegen/family.h"
#include "codegen/moe/emit.h"
#include "codegen/moe/space.h"

namespace onecat::moe {

struct Traits {
  using Spec = moe::Spec;
  using Config = moe::Config;
  static constexpr std::string_view kName = "moe";
  static constexpr int kGeneratorVersion = moe::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return moe::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m, Arch a) { return moe::default_config(s, m, a); }
  static std::vector<Config> candidate_configs(const Spec& s, Arch a) { return moe::candidate_configs(s, a); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return moe::fits_bucket(s, c, m); }
};

}  // namespace onecat::moe
