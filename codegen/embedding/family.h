// The embedding family, gathered for the registry.
#pragma once
#include "codegen/embedding/emit.h"
#include "codegen/embedding/space.h"
#include "codegen/family.h"

namespace onecat::embedding {

struct Traits {
  using Spec = embedding::Spec;
  using Config = embedding::Config;
  static constexpr std::string_view kName = "embedding";
  static constexpr int kGeneratorVersion = embedding::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return embedding::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m) { return embedding::default_config(s, m); }
  static std::vector<Config> candidate_configs(const Spec& s) { return embedding::candidate_configs(s); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return embedding::fits_bucket(s, c, m); }
};

}  // namespace onecat::embedding
