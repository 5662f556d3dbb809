// The gemm family, gathered for the registry.
#pragma once
#include "codegen/family.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/space.h"

namespace onecat::gemm {

struct Traits {
  using Spec = gemm::Spec;
  using Config = gemm::Config;
  static constexpr std::string_view kName = "gemm";
  static constexpr int kGeneratorVersion = gemm::kGeneratorVersion;
  static Emitted emit(const Spec& s, const Config& c, Arch a) { return gemm::emit(s, c, a); }
  static Config default_config(const Spec& s, int64_t m, Arch a) { return gemm::default_config(s, m, a); }
  static std::vector<Config> candidate_configs(const Spec& s, Arch a) { return gemm::candidate_configs(s, a); }
  static bool fits_bucket(const Spec& s, const Config& c, int64_t m) { return gemm::fits_bucket(s, c, m); }
};

}  // namespace onecat::gemm
