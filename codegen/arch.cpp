#include "codegen/arch.h"

#include <cctype>

#include "runtime/cuda/error.h"

namespace onecat {

Arch Arch::parse(std::string_view text) {
  std::string digits;
  std::string_view rest = text;
  if (rest.starts_with("sm_")) rest.remove_prefix(3);
  for (char c : rest) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
    } else if (c != '.' || digits.size() != 1) {
      digits.clear();
      break;
    }
  }
  if (digits.empty() || digits.size() > 3) {
    throw InputError("'" + std::string(text) + "' is not a GPU architecture; write it as sm_70, sm_80 or sm_90");
  }
  Arch arch{std::stoi(digits)};
  if (arch.sm < kMinSm) {
    throw InputError(arch.name() + " is older than Volta; onecat targets sm_70 and newer");
  }
  return arch;
}

}  // namespace onecat
