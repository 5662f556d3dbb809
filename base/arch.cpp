#include "base/arch.h"

#include <cctype>

#include "base/error.h"

namespace onecat {

Arch Arch::parse(std::string_view text) {
  // sm_70 | 70 | 7.0 | 10.0 (compute capability major.minor). Parsed by hand: std::regex
  // brings locale-dependent template code that clashed with torch's in one process.
  const std::string s(text);
  auto digits = [](std::string_view d, size_t lo, size_t hi) {
    if (d.size() < lo || d.size() > hi || d[0] == '0') return false;
    for (char c : d) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  std::string_view v = text;
  if (v.substr(0, 3) == "sm_") v.remove_prefix(3);
  int sm = 0;
  const size_t dot = v.find('.');
  if (dot == std::string_view::npos && digits(v, 2, 3)) {
    sm = std::stoi(std::string(v));
  } else if (dot != std::string_view::npos && text.substr(0, 3) != "sm_" && digits(v.substr(0, dot), 1, 2) &&
             v.size() == dot + 2 && std::isdigit(static_cast<unsigned char>(v[dot + 1]))) {
    sm = std::stoi(std::string(v.substr(0, dot))) * 10 + (v[dot + 1] - '0');
  } else {
    throw InputError(quoted_input(s) + " is not a GPU architecture; write it as sm_70, sm_80 or sm_90 (or 7.0)");
  }
  Arch arch{sm};
  if (arch.sm < kMinSm) throw InputError(arch.name() + " is older than Volta; onecat targets sm_70 and newer");
  return arch;
}

}  // namespace onecat
