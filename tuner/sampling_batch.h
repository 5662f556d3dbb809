// Inputs and the CPU verdict for the sampling family's checks (tuner/verify_sampling, the GPU
// tests, and tests/sampling_kernel_test's emulated kernels): random rows that exercise every
// setting, and a row-by-row comparison with runtime/cpu/sampling. No GPU here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/sampling/row_params.h"
#include "runtime/cpu/sampling.h"

namespace onecat {

// A chosen token may differ from the fp64 reference only where a decision (the inverse CDF's
// u·mass, the top_p cut, min_p) lies within this relative distance of its boundary: the
// kernel's weights are fp32 exponentials (relative error ≈ |x|·2^-23 for x = Δl/T, under 2e-6
// for every weight above 1e-6) summed exactly as 2^-40 fixed point.
inline constexpr double kSamplingBoundaryMargin = 1e-4;
// Logprobs: the fp32 log-sum-exp and one subtraction against fp64.
inline constexpr double kSamplingLogprobTolerance = 1e-4;

struct SamplingBatch {
  int vocab = 0;
  int64_t rows = 0;
  std::vector<float> logits;  // [rows][vocab]
  std::vector<cpu::SamplingParams> params;
  std::vector<uint64_t> steps;
  std::vector<int> prompt_lengths;
  std::vector<int> offsets;  // [rows + 1]: the CSR history
  std::vector<int> ids;

  std::vector<sampling::RowParams> row_params() const;
};

// rows rows of random logits (odd scales; some rows with ties, −inf, NaN, one all −inf) and
// settings: greedy and tiny to huge temperatures, top_k/top_p/min_p alone and together,
// penalties with histories that repeat ids, logprobs up to max_logprobs.
SamplingBatch make_sampling_batch(int vocab, int64_t rows, int max_logprobs, uint64_t seed);
// rows rows of the same logits and settings, each with its own seed: for the sampled
// frequencies.
SamplingBatch make_repeated_batch(const std::vector<float>& logits, const cpu::SamplingParams& p, int64_t rows,
                                  uint64_t seed);

struct SamplingOutput {
  std::vector<int> tokens;
  std::vector<float> token_logprobs;
  std::vector<int> top_ids;  // [rows][width]
  std::vector<float> top_logprobs;
  int width = 0;
};

struct SamplingVerdict {
  std::string detail;         // empty when every row agrees
  int64_t near_boundary = 0;  // rows whose token differs where kSamplingBoundaryMargin allows it
  double logprob_error = 0;   // the largest logprob difference
};
// Row by row against cpu::sample_decision: the token (exactly, or within the margin), its
// logprob, the top ids exactly and their logprobs; past a row's own count, ids −1 and −inf.
SamplingVerdict compare_sampling(const SamplingBatch& batch, const SamplingOutput& got);

// argmax: rows of random logits with repeated maxima, NaN and −inf, and the exact comparison.
std::vector<float> make_argmax_logits(int vocab, int64_t rows, uint64_t seed);
std::string compare_argmax(const std::vector<float>& logits, int vocab, const std::vector<int>& tokens);

}  // namespace onecat
