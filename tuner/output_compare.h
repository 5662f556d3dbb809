// Comparison of a kernel's output with its reference (the gemm checks): the normwise sums,
// the first non-finite output and, per element, a bound scaled by its row's magnitude (a norm
// alone lets tens of completely wrong outputs of a large matrix through), over every
// hardware thread. A tuning run compares every
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
  int64_t elements_over = 0;     // outputs outside the element-wise bound
  int64_t first_over = -1;       // the first of them, -1 if none
  double first_over_got = 0, first_over_want = 0, first_over_limit = 0;
};

// |got − want| ≤ row_rms_factor · rms(want's row) + relative · |want| for every element.
struct ElementBound {
  double row_rms_factor = 0;
  double relative = 0;
};

// got: rows × cols outputs as fp32 (got_f32) or fp16 bytes; want: the reference as the output
// holds it (fp16 outputs: see round_to_half). Deterministic: fixed chunks, summed in order.
OutputDiff compare_outputs(const uint8_t* got, bool got_f32, const float* want, int64_t rows, int64_t cols,
                           ElementBound bound);

// v rounded to fp16 and back, as an fp16 output holds it.
std::vector<float> round_to_half(const std::vector<float>& v);

}  // namespace onecat
