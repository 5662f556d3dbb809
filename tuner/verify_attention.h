// GPU checks of the attention family against runtime/cpu/attention on fresh random data:
// a shuffled page pool (block tables are not contiguous), random fp16 or fp8 caches, poisoned
// outputs with guard rows, every split kernel run twice (its counters must reset).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tuner/attention_batch.h"
#include "tuner/verify.h"

namespace onecat {

// The case check_kernel runs for bucket m (m = tokens for prefill and kv_write, sequences for
// decode and verify): mixed odd lengths, a length-1 (or length-q) sequence, a paged prefix.
AttentionCase attention_case_for(const std::string& spec, int64_t m, uint64_t seed);

CheckResult check_attention_case(const std::string& spec, const std::string& config, const LoadedKernel& kernel,
                                 const AttentionCase& c, uint64_t seed);

}  // namespace onecat
