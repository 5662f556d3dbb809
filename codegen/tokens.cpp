#include "codegen/tokens.h"

#include <bit>
#include <string>

#include "base/error.h"

namespace onecat {

void check_token_count(int64_t m) {
  if (m < 1 || m > kMaxTokens) {
    throw InputError("token count m=" + std::to_string(m) + " is out of range: it must be 1 to " +
                     std::to_string(kMaxTokens));
  }
}

int64_t pow2_ceil(int64_t v) {
  constexpr int64_t kLargest = int64_t(1) << 62;
  if (v > kLargest) throw Error("pow2_ceil(" + std::to_string(v) + "): above 2^62, the largest power of two it returns");
  return v <= 1 ? 1 : int64_t(std::bit_ceil(uint64_t(v)));
}

}  // namespace onecat
