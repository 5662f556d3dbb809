// A compile target: a real SM architecture such as sm_70 (Volta) or sm_90 (Hopper).
#pragma once
#include <string>
#include <string_view>

namespace onecat {

struct Arch {
  int sm = 70;  // compute capability major*10 + minor

  static Arch parse(std::string_view text);  // "sm_70", "70", "7.0"; throws InputError
  std::string name() const { return "sm_" + std::to_string(sm); }
  // The Volta matrix instruction is native only on sm_70/72; later chips emulate it.
  bool has_mma_m16n8k16() const { return sm >= 80; }
  friend bool operator==(Arch a, Arch b) { return a.sm == b.sm; }
};

// The oldest target onecat supports: Volta.
inline constexpr int kMinSm = 70;

}  // namespace onecat
