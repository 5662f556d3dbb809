// A draft model as a Drafter (EngineOptions::speculative = "draft:DIR", docs/engine.md): a
// smaller checkpoint with the target's tokenizer, on the same device, with its own paged KV
// cache. Each step it catches up on the tokens its cache lacks (a new request's prompt, the
// tokens the target accepted and added since), then proposes k tokens one forward each, all the
// step's requests batched together: greedy requests get its argmax (a certain draft), sampled
// ones a token drawn from its own distribution q under the request's settings (stream kDraft of
// engine/speculative.h), q returned for rejection sampling.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/drafter.h"
#include "engine/engine.h"
#include "models/model/model.h"

namespace onecat::engine {

class ModelDrafter final : public Drafter {
 public:
  // InputError when the draft's vocabulary is not the target's. p_min: EngineOptions::draft_p_min.
  ModelDrafter(std::unique_ptr<model::Model> draft, int64_t target_vocab, float p_min = 0.0f);
  ~ModelDrafter() override;

  std::vector<Draft> propose(std::span<const DraftRequest> requests) override;
  void release(int64_t id) override;

  const model::Model& model() const { return *model_; }
  // Tokens the draft model has run (catch-up and drafting), for the tests and statistics.
  int64_t computed_tokens() const { return computed_tokens_; }

 private:
  struct State {
    model::Sequence sequence;     // its pages in the draft model's pool
    std::vector<int32_t> cached;  // the tokens whose K/V it holds
  };
  void trim(State& s, int64_t length);  // back to `length` tokens, pages past them given back
  void run(std::vector<model::Model::Chunk>& chunks, std::vector<std::vector<float>>* logits);

  std::unique_ptr<model::Model> model_;
  std::map<int64_t, State> states_;
  float p_min_ = 0.0f;
  int64_t computed_tokens_ = 0;
};

// DIR of EngineOptions::speculative "draft:DIR", else nullopt.
std::optional<std::string> draft_directory(const std::string& speculative);

// EngineOptions::speculative "draft:DIR" on a GPU whose target pool is sized from memory
// (kv_cache_tokens 0): sets target.draft_page_bytes and draft_bytes from DIR's config.json and
// files, so the target's pool leaves the draft model (whose pool holds as many tokens) its
// memory: its KV per page in the target's cache dtype, its checkpoint's tensor bytes and an
// estimate of its buffers (the logits and activations of a max_batch_tokens step, and 256 MiB).
// Anything else: target unchanged. InputError when DIR has no readable config.json.
void leave_room_for_draft(model::ModelOptions& target, const EngineOptions& engine);

}  // namespace onecat::engine
