// The engine (docs/engine.md): many requests through one Model at once. Each step() plans one
// forward over the running requests — decodes first, then prefill chunks of new or partly
// prefilled prompts within a token budget and a sequence limit (continuous batching, chunked
// prefill) — on KV pages from a BlockManager (prefix caching: a prompt's leading full pages
// already computed by an earlier request are shared, not recomputed), samples each finished
// chunk's next token and retires requests at a stop id or max_tokens. When pages run out, the
// latest arrival is preempted: its pages are let go and it is recomputed later from its tokens
// so far (its output continues where it stopped: sampling is a function of seed and step).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/drafter.h"
#include "engine/grammar.h"
#include "models/model/model.h"
#include "runtime/cpu/sampling.h"

namespace onecat::engine {

struct EngineOptions {
  int64_t max_num_batched_tokens = 0;  // tokens per step, ≤ the model's max_batch_tokens (0: that)
  int max_num_seqs = 0;                // sequences per step, ≤ the model's max_sequences (0: that)
  bool prefix_caching = true;
  // Sample where the logits are (Backend::read_sampled: on the GPU the sampling kernel, so only
  // the ids leave the device) instead of copying them to the host sampler; steps that verify
  // drafts, give prompt logprobs or apply a logit_bias sample on the host either way. On the CPU
  // backend both are cpu::sample; on the GPU the kernel follows the host sampler's distribution
  // (GpuEngine.DeviceSamplingFollowsTheHostSampler), not its exact draws.
  bool device_sampling = true;
  // Speculative decoding (docs/engine.md): up to this many draft tokens per decoding request and
  // step (k, 0: off; Request::num_draft_tokens lowers it per request), verified by the same
  // forward so the output keeps the target's distribution (engine/speculative.h): a greedy
  // output is the target's own.
  int num_speculative_tokens = 0;
  // The drafter: "ngram" (prompt lookup, engine/drafter.h) or "draft:DIR" (a draft checkpoint
  // with the target's vocabulary, engine/draft_model.h, loaded with the target's ModelOptions).
  std::string speculative = "ngram";
  int ngram_min = 1, ngram_max = 4;  // the n-gram lengths the drafter matches, longest first
  // A draft model stops drafting for a request, this step, at the first draft whose
  // distribution's most likely token has less probability than this (llama.cpp's
  // --draft-p-min): drafts it is unsure of are mostly rejected, and each costs a draft forward
  // and a verified row. 0: always k.
  float draft_p_min = 0.0f;
  // A drafter of one's own instead of `speculative` (tests; drafters on hidden states later).
  std::shared_ptr<Drafter> drafter;
};

struct Request {
  std::vector<int32_t> prompt;
  cpu::SamplingParams sampling;   // validated by add(); vLLM's defaults (temperature 1); temperature 0: greedy
  int64_t max_tokens = 16;        // ≥ 1; 0 only with prompt_logprobs (the prompt's logprobs alone)
  std::vector<int32_t> stop_ids;  // a generated stop id ends the request (and is its last token)
  // n ≥ 0: the logprob of every prompt token but the first (which has none) under the logits of
  // the tokens before it, with the n most likely there, computed during prefill (−1: off). The
  // places they need are computed, not taken from the prefix cache. With max_tokens 0 the
  // request ends (reason "length", no token) once its prompt is computed.
  int prompt_logprobs = -1;
  // Draft tokens per step for this request: −1 the engine's num_speculative_tokens, else 0 (none)
  // up to it.
  int num_draft_tokens = -1;
  // Structured output (engine/grammar.h): every token is one the grammar allows, sampled on the
  // host under its mask; the request ends ("stop") once nothing can follow its text, or at a
  // stop id once the text is whole. Its own state (one per request), over the model's
  // vocabulary. Its drafts are cut at the first the grammar refuses (or that would end it) and
  // verified under the masks; with logprobs it gets none.
  std::shared_ptr<GrammarConstraint> constraint;
};

// One place's logprobs: its token's under the raw logits, and the n most likely (id, logprob),
// best first (cpu::token_logprobs).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int, float>> top;
  friend bool operator==(const TokenLogprobs&, const TokenLogprobs&) = default;
};

// What a step produced for one request: its new token, and whether it is done.
struct StepOutput {
  int64_t id = 0;
  int32_t token = -1;  // −1: none (a cancelled request)
  bool finished = false;
  std::string finish_reason;  // "stop", "length" or "cancelled" once finished
  // With Request::sampling.logprobs = n > 0: the token's logprob under the raw logits and the
  // n most likely (id, logprob), best first (cpu::SampledToken's).
  float logprob = 0;
  std::vector<std::pair<int, float>> top_logprobs;
  // With Request::prompt_logprobs ≥ 0, on the request's first output: prompt tokens 1 … P−1's.
  std::vector<TokenLogprobs> prompt_logprobs;
};

struct EngineStats {
  int64_t steps = 0, preemptions = 0;
  int64_t prompt_tokens = 0;      // prompt tokens of the requests added
  int64_t prefix_hit_tokens = 0;  // of them, found in the prefix cache instead of computed
  int64_t computed_tokens = 0;    // tokens run through the model (recomputes included)
  int64_t generated_tokens = 0;
  // Steps that were not plain greedy (their logits sampled or copied out); of them, those
  // sampled where the logits are (EngineOptions::device_sampling).
  int64_t sampled_steps = 0, device_sampled_steps = 0;
  int64_t draft_tokens = 0;          // speculative tokens proposed and verified
  int64_t accepted_tokens = 0;       // of them, accepted
  std::vector<int64_t> accepted_at;  // [k]: drafts at position k + 1 accepted (acceptance by position)
  std::vector<int64_t> drafted_at;   // [k]: drafts verified at position k + 1
  int64_t draft_rounds = 0;          // (request, step) pairs that verified drafts: a round
                                     // adds (accepted_tokens + draft_rounds) / draft_rounds tokens
};

class Engine {
 public:
  // The model's KV pool and step limits bound the engine's; the engine plans every step itself
  // (Model::forward), so the model's own Sequence helpers must not be used alongside it.
  Engine(model::Model& model, const EngineOptions& options = {});
  ~Engine();

  // Queues a request; its id. InputError for an empty prompt, an id outside the vocabulary,
  // bad sampling settings, max_tokens < 1 (0 with prompt_logprobs), prompt_logprobs past
  // cpu::kMaxLogprobs, or a request the whole KV cache cannot hold.
  int64_t add(Request request);
  // Ends a queued or running request now, its pages let go; false when no such request is
  // unfinished. The next step() reports it finished, reason "cancelled".
  bool cancel(int64_t id);
  // No request queued or running (and no cancellation left to report).
  bool idle() const;
  // Requests admitted (holding pages) and queued (new or preempted), for metrics.
  int64_t running() const { return int64_t(running_.size()); }
  int64_t waiting() const { return int64_t(waiting_.size()); }
  // One forward step (nothing when idle): the outputs of the requests it advanced.
  std::vector<StepOutput> step();

  const EngineStats& stats() const { return stats_; }
  // The decode steps' CUDA graphs the constructor captured (Model::capture_graphs, up to
  // max_num_seqs; none off the GPU or with cuda_graphs off).
  const model::Model::GraphStats& graphs() const { return graphs_; }
  // The prefill steps the constructor ran on padding (Model::warm_up, up to max_num_batched_tokens).
  const model::Model::WarmStats& warm_up() const { return warm_; }
  const BlockManager& blocks() const { return blocks_; }

 private:
  struct Seq;
  struct Chunk {
    Seq* seq;
    int64_t tokens;
  };
  void admit_prefix(Seq& s);
  bool grow(Seq& s, int64_t length);  // pages for `length` tokens; false (unchanged) if none left
  void preempt(Seq& s);
  void let_go(Seq& s);
  void cache_pages(Seq& s);
  // Drafts for the decode chunks planned so far (appended to their tokens, s.drafted), within
  // `budget` more tokens; what they take is taken from it.
  void draft(std::vector<Chunk>& chunks, int64_t& budget);
  // Keeps s's accepted drafts and the token after them (engine/speculative.h's verdict), rolls
  // back the rest and appends the new tokens (their outputs to `out`).
  void verify(Seq& s, std::vector<cpu::SampledToken> tokens, int64_t accepted, std::vector<StepOutput>& out);
  // Appends s's new token o.token, ending the request at a stop id or max_tokens; true then.
  bool append(Seq& s, StepOutput o, std::vector<StepOutput>& out);
  // The places [from, to) of s whose rows its prompt logprobs still need (from = to: none).
  std::pair<int64_t, int64_t> prompt_rows(const Seq& s, int64_t begin, int64_t end) const;
  // Appends the prompt logprobs of this step's rows (chunk k's last row row_of[k], the others
  // from prompt_row_of[k] on) to each sequence's.
  void collect_prompt_logprobs(const std::vector<Chunk>& chunks, const std::vector<int32_t>& row_of,
                               const std::vector<int32_t>& prompt_row_of, const std::vector<float>& logits);
  std::vector<Chunk> plan();
  std::shared_ptr<Drafter> make_drafter() const;

  model::Model& model_;
  EngineOptions options_;
  BlockManager blocks_;
  int64_t next_id_ = 0;
  std::deque<std::unique_ptr<Seq>> waiting_;   // arrival order, preempted ones in front
  std::vector<std::unique_ptr<Seq>> running_;  // arrival order
  std::vector<StepOutput> cancelled_;          // reported by the next step
  EngineStats stats_;
  model::Model::GraphStats graphs_;
  model::Model::WarmStats warm_;
  std::shared_ptr<Drafter> drafter_;  // with num_speculative_tokens > 0
};

}  // namespace onecat::engine
