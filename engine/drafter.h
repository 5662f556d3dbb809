// Draft tokens for speculative decoding (EngineOptions::num_speculative_tokens, docs/engine.md).
// A Drafter proposes up to k tokens for each decoding request of a step; the engine verifies
// them with one target forward (engine/speculative.h) and tells the drafter nothing more: a
// drafter that keeps state per request (a draft model's KV cache) compares the tokens it is
// given with what it saw last time, and drops a request's state on release().
//
// N-gram prompt lookup (NgramDrafter): the sequence's last n tokens, for n from max_n down to
// min_n, are looked for earlier in the sequence (prompt and output), and the tokens that
// followed their latest earlier occurrence are the draft — no model needed, and on text that
// repeats its context (code being edited, quoted passages, lists) the target often agrees. A
// draft model: engine/draft_model.h.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/cpu/sampling.h"

namespace onecat::engine {

// What a drafter sees of one decoding request.
struct DraftRequest {
  int64_t id = 0;                                 // the engine's request id: a drafter's state is kept by it
  std::span<const int32_t> tokens;                // the prompt, then the output so far (the last one is the
                                                  // target's pending token: its K/V are not yet computed)
  int64_t prompt_length = 0;                      // tokens[prompt_length:] is the output
  int k = 0;                                      // at most this many drafts (≥ 1)
  const cpu::SamplingParams* sampling = nullptr;  // the request's: a drafter that samples draws with
                                                  // its seed (engine/speculative.h, RandomStream::kDraft)
  // For drafters that read them (Drafter::wants_hidden_states; MTP heads, EAGLE, block drafters;
  // else empty): the target's final hidden states (the final norm's output, the lm_head's input)
  // of the rows whose logits gave the request's tokens in its last step, [rows][hidden] — one row,
  // or a verify step's accepted drafts and the token after them. Row i is the position whose
  // logits chose tokens[size − rows + i].
  std::span<const float> hidden;
};

// A drafter's proposal for one request.
struct Draft {
  std::vector<int32_t> tokens;  // at most the request's k; empty: none this step
  // Empty: every token proposed with certainty (n-gram lookup, greedy drafting) and verified as
  // such. Else q[i] is the distribution [vocab] tokens[i] was drawn from, for rejection sampling
  // (accept with min(1, p/q), resample from norm(max(0, p − q))).
  std::vector<std::vector<float>> q;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // One draft per request, in order; requests are distinct.
  virtual std::vector<Draft> propose(std::span<const DraftRequest> requests) = 0;
  // The request finished, was cancelled or preempted: state kept for it may go.
  virtual void release(int64_t /*id*/) {}
  // Whether DraftRequest::hidden must be filled (a drafter on the target's hidden states).
  virtual bool wants_hidden_states() const { return false; }
};

// Up to k tokens after the latest earlier match of the longest suffix (n in [min_n, max_n])
// that has one; empty when none matches.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int k, int min_n, int max_n);

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {}
  std::vector<Draft> propose(std::span<const DraftRequest> requests) override;

 private:
  int min_n_, max_n_;
};

}  // namespace onecat::engine
