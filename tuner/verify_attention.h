// GPU checks of the attention family against runtime/cpu/attention on fresh random data:
// a shuffled page pool (block tables are not contiguous), random fp16 or fp8 caches, poisoned
// outputs with guard rows, every split kernel run twice (its counters must reset).
#pragma once
#include <cstdint>
#include <memory>
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

// One case's inputs on the GPU and its CPU reference, made once, for checking many configs of
// one spec (the tuner checks every candidate of a bucket against the same reference: at large
// buckets the fp64 reference takes far longer than the kernels). kv_write remakes its cache
// per check (the kernel writes into it).
class AttentionCheck {
 public:
  AttentionCheck(const std::string& spec, const AttentionCase& c, uint64_t seed);
  CheckResult run(const std::string& config, const LoadedKernel& kernel);

 private:
  attention::Spec spec_;
  AttentionCase case_;
  uint64_t seed_;
  AttentionBatch batch_;
  std::unique_ptr<DeviceAttentionBatch> input_;
  std::vector<uint16_t> want_;
};

}  // namespace onecat
