// CPU reference of the sampling family (the oracle for its GPU checks, and the CPU backend's
// sampler): one row of fp32 logits → the next token, its logprob and the top-n logprobs.
// docs/sampling.md defines every step; in short, per row:
//   raw     = logits with NaN → −inf and +inf → FLT_MAX (and −0 → +0)
//   logprobs (vLLM's default "raw" mode) = log_softmax(raw): the chosen token's and the top n
//   l       = raw with penalties, in fp32 exactly as the GPU does them:
//             repetition (prompt ∪ output tokens): l > 0 ? l / rep : l · rep
//             frequency, presence (output tokens, count c > 0): l − freq·c, then − presence
//   greedy  (temperature < kGreedyTemperature): argmax l, the lowest id among equal maxima
//   else    every filter keeps a prefix of the order (l descending, id ascending):
//             w = exp((l − max l) / temperature); min_p keeps w ≥ min_p; top_k keeps k tokens;
//             top_p keeps the shortest prefix of what is left whose mass Σw ≥ top_p · its mass
//           u = philox_uniform(seed, step) ∈ (0, 1]; the kept tokens in id order, the first
//           whose cumulative mass ≥ u · their mass is the token.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codegen/sampling/row_params.h"

namespace onecat::cpu {

// The most top logprobs a row may ask for (OpenAI's and vLLM's default limit).
inline constexpr int kMaxLogprobs = 20;
// Temperatures below this sample greedily (vLLM's _SAMPLING_EPS).
inline constexpr float kGreedyTemperature = 1e-5f;

// One sequence's sampling settings, as vLLM's SamplingParams names them.
struct SamplingParams {
  float temperature = 1;         // < kGreedyTemperature: greedy
  int top_k = 0;                 // 0 or −1: off
  float top_p = 1;               // 1: off
  float min_p = 0;               // 0: off
  float repetition_penalty = 1;  // 1: off
  float presence_penalty = 0;
  float frequency_penalty = 0;
  uint64_t seed = 0;  // with the step, the only source of randomness
  int logprobs = 0;   // how many top logprobs to return (0 … kMaxLogprobs)
  // OpenAI's logit_bias: (token id, bias in [−100, 100]) added to the raw logits before the
  // penalties, ids distinct (sample() checks them against the vocabulary). Not the logprobs'
  // distribution, which stays the raw one. The host sampler only: row_params() refuses it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

// The bias OpenAI's logit_bias allows, either way.
inline constexpr float kMaxLogitBias = 100;

// Greedy with no penalty, no bias and no logprobs: the token is the argmax of the raw logits, so a
// backend can pick it where the logits are (Model::forward_argmax) and copy out only the id.
inline bool plain_greedy(const SamplingParams& p) {
  return p.temperature < kGreedyTemperature && p.repetition_penalty == 1 && p.presence_penalty == 0 &&
         p.frequency_penalty == 0 && p.logprobs == 0 && p.logit_bias.empty();
}

// One sentence naming the first bad setting (e.g. "top_p must be in (0, 1], got 1.5"), or
// nothing. The server, the CLI and the Python bindings check requests with it.
std::optional<std::string> invalid_reason(const SamplingParams& p);
// Throws InputError with invalid_reason's sentence.
void validate(const SamplingParams& p);

struct SampledToken {
  int token = 0;
  float logprob = 0;                       // log_softmax(raw)[token]
  std::vector<std::pair<int, float>> top;  // p.logprobs (id, logprob), best first, ties by lower id
};

// Samples row `logits` [vocab]. prompt_tokens and output_tokens are the sequence's history
// (ids in [0, vocab), duplicates count for the frequency penalty); step is this token's index
// in the sequence's output (with the seed, the random counter). Throws InputError for bad
// params or ids. Without token_logprob (and with p.logprobs = 0) the token's logprob is not
// computed (0): a pass of exp over the row saved.
SampledToken sample(const float* logits, int64_t vocab, const SamplingParams& p, std::span<const int> prompt_tokens,
                    std::span<const int> output_tokens, uint64_t step, bool token_logprob = true);

// Several rows at once (the engine's step), on every core: the rows in parallel, or a single
// row's passes over the vocabulary split in chunks. Each row's result is sample()'s, bit for bit.
struct SampleRow {
  const float* logits;  // [vocab]
  const SamplingParams* params;
  std::span<const int> prompt_tokens, output_tokens;
  uint64_t step = 0;
  bool token_logprob = true;
  // Constrained decoding: a bit per token (bit id % 32 of word id / 32); tokens without their bit
  // get −inf after the penalties, so they are never drawn (the logprobs stay the raw ones, as
  // with logit_bias). At least one token must be allowed. nullptr: every token.
  const uint32_t* allowed = nullptr;
};
std::vector<SampledToken> sample_rows(std::span<const SampleRow> rows, int64_t vocab);

// What sample() reports for a token given rather than drawn (prompt logprobs): `token`'s
// log_softmax(raw) in row `logits` [vocab] and the n most likely (id, logprob), best first.
SampledToken token_logprobs(const float* logits, int64_t vocab, int token, int n);

// The distribution sample() draws from: the tokens the penalties and filters keep, in id order,
// with their probabilities (summing to 1); a greedy row gives its token with 1. Speculative
// decoding's rejection sampling (engine/speculative.h) weighs draft tokens against it.
std::vector<std::pair<int, double>> sampling_distribution(const float* logits, int64_t vocab, const SamplingParams& p,
                                                          std::span<const int> prompt_tokens,
                                                          std::span<const int> output_tokens);

// Sets each token's logit to −inf unless its bit is in `allowed` (SampleRow::allowed's layout);
// whether any token is allowed.
bool mask_logits(std::span<float> logits, const uint32_t* allowed);

// Lowest index among equal maxima; NaN never wins unless every value is NaN or −inf (then 0).
int argmax(const float* logits, int64_t vocab);

// What sample decided and how close it came to deciding otherwise, for comparing a GPU's
// fp32 choice with this fp64 one: `margin` is the smallest relative distance of any decision
// from its boundary (u·mass against the chosen token's cumulative mass interval, the top_p
// cut, a weight against min_p), +inf when greedy. A GPU may pick differently only where
// margin is within its rounding.
struct SampleDecision {
  SampledToken sampled;
  int64_t kept = 0;  // tokens left after the filters (0 when greedy)
  double margin = 0;
};
SampleDecision sample_decision(const float* logits, int64_t vocab, const SamplingParams& p,
                               std::span<const int> prompt_tokens, std::span<const int> output_tokens, uint64_t step);

// The GPU kernel's row struct (codegen/sampling/row_params.h) for these settings, this step
// and a history whose first prompt_length ids are the prompt's. InputError for a logit_bias,
// which the kernel does not apply.
sampling::RowParams row_params(const SamplingParams& p, uint64_t step, int prompt_length);

// Building blocks, exposed for the tests and the GPU check.
// Philox-4x32-10 (Salmon et al., SC'11): one block of four 32-bit outputs.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// The uniform of (seed, step): key = seed, counter = (step, 0); ((x0 >> 8) + 1) · 2^-24, so
// u ∈ (0, 1] is exact in fp32 on both sides.
float philox_uniform(uint64_t seed, uint64_t step);
// NaN → −inf, +inf → FLT_MAX, −0 → +0.
float sanitize_logit(float v);
// The penalised row (sanitised, then biased by logit_bias), in fp32 with the GPU's exact
// operation order.
std::vector<float> penalized_logits(const float* logits, int64_t vocab, const SamplingParams& p,
                                    std::span<const int> prompt_tokens, std::span<const int> output_tokens);

}  // namespace onecat::cpu
