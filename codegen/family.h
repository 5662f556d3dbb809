// A kernel family as the rest of onecat sees it: specs and configs travel as canonical
// text, so the runtime, the cache and the CLI know nothing about any one family.
// A family is written as a few typed pieces (spec, config, emit, space) and adapted
// here by TypedFamily.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/arch.h"
#include "codegen/tokens.h"

namespace onecat {

// One translation unit and the name expression NVRTC lowers to the kernel's symbol.
struct Emitted {
  std::string source;
  std::string kernel_expression;
};

struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamic_shared_bytes = 0;
};

class Family {
 public:
  virtual ~Family() = default;
  virtual std::string_view name() const = 0;
  // Bumped whenever emit() or the family's templates change what they generate; part of
  // every tuning-record key.
  virtual int generator_version() const = 0;
  virtual std::string canonical_spec(std::string_view spec) const = 0;
  virtual std::string canonical_config(std::string_view spec, std::string_view config) const = 0;
  // Both depend on the target arch (e.g. the gemm family's sm_80+ tensor-core atom). A token
  // count m outside 1..kMaxTokens is an InputError (here and in fits_bucket).
  virtual std::string default_config(std::string_view spec, int64_t m, Arch arch) const = 0;
  virtual std::vector<std::string> candidate_configs(std::string_view spec, Arch arch) const = 0;
  // Whether a candidate is worth timing for token count m (e.g. gemv tiles of that size).
  virtual bool fits_bucket(std::string_view spec, std::string_view config, int64_t m) const = 0;
  virtual Emitted emit(std::string_view spec, std::string_view config, Arch arch) const = 0;
};

// Traits: Spec (parse, to_string), Config (parse(spec, text) validating, to_string),
// kGeneratorVersion, kName, emit(spec, config, arch), default_config(spec, m[, arch]),
// candidate_configs(spec[, arch]), fits_bucket(spec, config, m). A family whose space does
// not depend on the arch leaves the arch parameter out.
template <class Traits>
class TypedFamily final : public Family {
 public:
  using Spec = typename Traits::Spec;
  using Config = typename Traits::Config;

  std::string_view name() const override { return Traits::kName; }
  int generator_version() const override { return Traits::kGeneratorVersion; }
  std::string canonical_spec(std::string_view spec) const override { return Spec::parse(spec).to_string(); }
  std::string canonical_config(std::string_view spec, std::string_view config) const override {
    return Config::parse(Spec::parse(spec), config).to_string();
  }
  std::string default_config(std::string_view spec, int64_t m, Arch arch) const override {
    check_token_count(m);
    const Spec s = Spec::parse(spec);
    if constexpr (requires { Traits::default_config(s, m, arch); }) {
      return Traits::default_config(s, m, arch).to_string();
    } else {
      return Traits::default_config(s, m).to_string();
    }
  }
  std::vector<std::string> candidate_configs(std::string_view spec, Arch arch) const override {
    const Spec s = Spec::parse(spec);
    std::vector<std::string> out;
    if constexpr (requires { Traits::candidate_configs(s, arch); }) {
      for (const auto& c : Traits::candidate_configs(s, arch)) out.push_back(c.to_string());
    } else {
      for (const auto& c : Traits::candidate_configs(s)) out.push_back(c.to_string());
    }
    return out;
  }
  bool fits_bucket(std::string_view spec, std::string_view config, int64_t m) const override {
    check_token_count(m);
    Spec s = Spec::parse(spec);
    return Traits::fits_bucket(s, Config::parse(s, config), m);
  }
  Emitted emit(std::string_view spec, std::string_view config, Arch arch) const override {
    Spec s = Spec::parse(spec);
    return Traits::emit(s, Config::parse(s, config), arch);
  }
};

// The family a spec names ("rmsnorm:…" → rmsnorm); throws InputError listing the known ones.
const Family& family_of(std::string_view spec);
// The registered family of that name ("gemm"), or nullptr.
const Family* find_family(std::string_view name);
// Every registered family, in registry order (codegen/registry.cpp: one line per family).
std::vector<const Family*> all_families();
// Their names, comma separated, for messages ("rmsnorm, gemm, attention").
std::string family_names();

}  // namespace onecat
