// The token count M: the one run-time dimension of every family (ARCHITECTURE rule 1). The
// defaults and the tuner's bucket filter take it; a kernel takes it as an int.
#pragma once
#include <cstdint>

namespace onecat {

inline constexpr int64_t kMaxTokens = (int64_t(1) << 31) - 1;

// Throws InputError naming m unless 1 ≤ m ≤ kMaxTokens.
void check_token_count(int64_t m);

// The smallest power of two ≥ v (1 for v ≤ 1), for v up to 2^62; Error above that.
int64_t pow2_ceil(int64_t v);

}  // namespace onecat
