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
  // Programmatic dependent launch (griddepcontrol): a kernel may start before the one it
  // follows in the stream ends (templates/common/grid.cuh).
  bool has_programmatic_launch() const { return sm >= 90; }
  // Shared memory one CTA may opt into (CUDA C Programming Guide, compute capabilities table):
  // 96 KiB on sm_70/72, 64 KiB on sm_75, 163 KiB on sm_80/87, 99 KiB on sm_86/89/120,
  // 227 KiB on sm_90/100.
  int max_shared_bytes_per_cta() const {
    if (sm == 75) return 64 * 1024;
    if (sm < 80) return 96 * 1024;
    if (sm == 80 || sm == 87) return 163 * 1024;
    if (sm == 90 || sm == 100 || sm == 101 || sm == 103) return 227 * 1024;
    return 99 * 1024;
  }
  friend bool operator==(Arch a, Arch b) { return a.sm == b.sm; }
};

// The oldest target onecat supports: Volta.
inline constexpr int kMinSm = 70;

}  // namespace onecat
