// rmsnorm spec: what is fixed at compile time.
//   rmsnorm:hidden=4096,dtype=f16,residual=1
#pragma once
#include <string>
#include <string_view>

namespace onecat::rmsnorm {

// The row is held in registers: at most 1024 threads × 64 values (Config::kMaxValuesPerThread).
inline constexpr int kMaxHidden = 65536;

struct Spec {
  int hidden = 0;
  bool residual = false;  // fused residual add (residual <- x + residual, normalise that)

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  friend bool operator==(const Spec&, const Spec&) = default;
};

}  // namespace onecat::rmsnorm
