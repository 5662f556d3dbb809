// The rmsnorm family, gathered for the registry.
#pragma once
#include "codegen/family.h"
#include "codegen/rmsnorm/emit.h"
#include "codegen/rmsnorm/space.h"

namespace onecat::rmsnorm {

struct Traits {
  using Spec = rmsnorm::Spec;
  using Config = rmsnorm::Config;
  static constexpr std::string_view kName = "rmsnorm";
  static constexpr int kGeneratorVersion = rmsnorm::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return rmsnorm::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m) { return rmsnorm::default_config(s, m); }
  static std::vector<Config> candidate_configs(const Spec& s) { return rmsnorm::candidate_configs(s); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return rmsnorm::fits_bucket(s, c, m); }
};

}  // namespace onecat::rmsnorm
