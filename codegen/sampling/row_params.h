// One row's sampling settings as the sample kernel reads them: the device layout of
// templates/sampling/common.cuh's RowParams, field for field (asserted below). Hosts fill
// an array of these, one per row (runtime/cpu/sampling.h row_params makes one from
// SamplingParams).
#pragma once
#include <cstddef>
#include <cstdint>

namespace onecat::sampling {

struct RowParams {
  float temperature = 1;  // below 1e-5: greedy
  float top_p = 1;        // ≥ 1: off
  float min_p = 0;        // ≤ 0: off
  float repetition_penalty = 1;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  int32_t top_k = 0;     // ≤ 0: off
  int32_t logprobs = 0;  // top logprobs wanted (the kernel clamps to the spec's)
  uint64_t seed = 0;
  uint64_t step = 0;          // this token's index in the sequence's output: the Philox counter
  int32_t prompt_length = 0;  // the first prompt_length ids of the row's history are the prompt's
  int32_t reserved = 0;
};

static_assert(sizeof(RowParams) == 56 && alignof(RowParams) == 8);
static_assert(offsetof(RowParams, top_k) == 24 && offsetof(RowParams, seed) == 32 && offsetof(RowParams, step) == 40 &&
              offsetof(RowParams, prompt_length) == 48);

}  // namespace onecat::sampling
