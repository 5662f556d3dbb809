// Verifying a request's draft tokens against the target (docs/engine.md, "Speculative
// decoding"): which drafts a step keeps and the token after them, so that a sampled request's
// output has exactly the distribution the target alone gives it, and a greedy one is the
// target's own output.
//
// The rule is the standard one (Leviathan et al. 2023, Chen et al. 2023). Row i of the target's
// logits follows the context and drafts d_1 … d_i; p_i is the distribution cpu::sample draws
// from there (temperature, top_k, top_p, min_p, penalties over the history with the drafts
// before it), and q_i the drafter's. Draft d_{i+1} = x is accepted with probability
// min(1, p_i(x)/q_i(x)); at the first rejection the token is drawn from norm(max(0, p_i − q_i))
// and the rest are dropped; when all m are accepted, row m gives one more token from p_m.
//
// Random draws: Philox-4x32-10 keyed by the request's seed, counter (step, stream), step being
// the token's index in the output — the same function of (seed, step) as the plain sampler, so
// outputs do not depend on batching, preemption or how many drafts a step took:
//   RandomStream::kToken  (stream 0, cpu::philox_uniform(seed, step) itself): every token the
//       target draws — the plain sampler's, the residual draw after a rejection, the bonus token.
//   RandomStream::kAccept (stream 1): the acceptance test of a draft with a distribution q.
//   RandomStream::kDraft  (stream 2): a drafter sampling its proposal from q.
// A draft proposed with certainty (q a point mass: n-gram lookup, greedy drafting) is verified
// with the plain sampler's own draw: the target samples row i exactly as it would without
// speculation and the draft is accepted iff it drew the draft. That is the rule above with its
// two draws coupled (accepted with probability p(x); otherwise the token is distributed as p
// without x, renormalised) — and it makes such outputs token for token the plain engine's.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/cpu/sampling.h"

namespace onecat::engine {

enum class RandomStream : uint32_t { kToken = 0, kAccept = 1, kDraft = 2 };

// The uniform in (0, 1] of (seed, step, stream): ((x0 >> 8) + 1) · 2^-24 of Philox with key = seed
// and counter = (step, stream); stream kToken is cpu::philox_uniform(seed, step).
float random_uniform(uint64_t seed, uint64_t step, RandomStream stream);

// Inverse CDF in id order: the first token whose cumulative mass reaches u × the total mass
// (the last with mass when rounding leaves u·total above the sum).
int draw(std::span<const std::pair<int, double>> distribution, double u);
int draw(std::span<const float> weights, double u);  // weights[id], any positive total

// One request's drafts and the target's rows over them.
struct DraftRows {
  std::span<const float* const> rows;  // m + 1 rows of logits [vocab]; row i follows drafts[0, i)
  int64_t vocab = 0;
  std::span<const int32_t> drafts;        // m
  std::span<const std::vector<float>> q;  // empty (certain drafts) or m distributions [vocab]
  const cpu::SamplingParams* params = nullptr;
  std::span<const int> prompt, output;  // the history before the drafts
};

struct Verified {
  std::vector<cpu::SampledToken> tokens;  // the accepted drafts, then one more token
  int64_t accepted = 0;                   // tokens.size() − 1
};

// The drafts the rule keeps and the token after them. Tokens carry their raw logprob (and the
// params.logprobs best) as cpu::sample reports them when params.logprobs > 0, else 0.
Verified verify_drafts(const DraftRows& d);

}  // namespace onecat::engine
