// Normwise comparison of a kernel's output with its reference (the gemm checks): the sums and
// the first non-finite output, over every hardware thread. A tuning run compares every
// candidate's output, and at large buckets that is tens of millions of values per candidate
// (lm_head at M=512: 78 M), so one thread converting fp16 element by element was a large part
// of a whole-model tune.
#pragma once
#include <cstdint>
#include <vector>

namespace onecat {

struct OutputDiff {
  double diff2 = 0;              // Σ (got − want)²
  double ref2 = 0;               // Σ want²
  int64_t first_nonfinite = -1;  // the first output that is NaN or ±inf, -1 if none
  double nonfinite_value = 0;    // its value
};

// got: `count` outputs as fp32 (got_f32) or fp16 bytes; want: the reference as the output
// holds it (fp16 outputs: see round_to_half). Deterministic: fixed chunks, summed in order.
OutputDiff compare_outputs(const uint8_t* got, bool got_f32, const float* want, int64_t count);

// v rounded to fp16 and back, as an fp16 output holds it.
std::vector<float> round_to_half(const std::vector<float>& v);

}  // namespace onecat
