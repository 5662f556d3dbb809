#include "codegen/arch.h"

#include <regex>

#include "runtime/cuda/error.h"

namespace onecat {

Arch Arch::parse(std::string_view text) {
  // sm_70 | 70 | 7.0 | 10.0 (compute capability major.minor)
  static const std::regex sm_form("(?:sm_)?([1-9][0-9]{1,2})");
  static const std::regex cc_form("([1-9][0-9]?)\\.([0-9])");
  const std::string s(text);
  std::smatch m;
  int sm = 0;
  if (std::regex_match(s, m, sm_form)) {
    sm = std::stoi(m[1]);
  } else if (std::regex_match(s, m, cc_form)) {
    sm = std::stoi(m[1]) * 10 + std::stoi(m[2]);
  } else {
    throw InputError("'" + s + "' is not a GPU architecture; write it as sm_70, sm_80 or sm_90 (or 7.0)");
  }
  Arch arch{sm};
  if (arch.sm < kMinSm) throw InputError(arch.name() + " is older than Volta; onecat targets sm_70 and newer");
  return arch;
}

}  // namespace onecat
