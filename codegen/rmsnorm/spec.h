// rmsnorm spec: what is fixed at compile time.
//   rmsnorm:hidden=4096,dtype=f16,residual=1
#pragma once
#include <string>
#include <string_view>

namespace onecat::rmsnorm {

// The row is held in registers: a 1024-thread CTA leaves 64 registers per thread, half of
// them for row values (Config::invalid_reason), so 32 values × 1024 threads. An odd row
// loads one value per access and needs more registers per value: at most 16 per thread.
inline constexpr int kMaxHidden = 32768;
inline constexpr int kMaxOddHidden = 16384;

struct Spec {
  int hidden = 0;
  bool residual = false;  // fused residual add (residual <- x + residual, normalise that)

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  friend bool operator==(const Spec&, const Spec&) = default;
};

}  // namespace onecat::rmsnorm
