#include "engine/draft_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "engine/speculative.h"
#include "models/config.h"
#include "models/plan.h"

namespace onecat::engine {
namespace {

// The softmax's largest probability over a row of raw logits: the draft model's confidence.
double top_probability(const float* row, int64_t vocab) {
  const float most = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - double(most));
  return 1.0 / sum;
}

}  // namespace

ModelDrafter::ModelDrafter(std::unique_ptr<model::Model> draft, int64_t target_vocab, float p_min)
    : model_(std::move(draft)), p_min_(p_min) {
  const int64_t vocab = model_->config().vocab;
  if (vocab != target_vocab) {
    throw InputError("the draft model's vocabulary has " + std::to_string(vocab) + " tokens and the target's " +
                     std::to_string(target_vocab) + ": a draft model must share the target's tokenizer.");
  }
}

ModelDrafter::~ModelDrafter() {
  for (auto& [id, s] : states_) model_->release(s.sequence);
}

void ModelDrafter::release(int64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  model_->release(it->second.sequence);
  states_.erase(it);
}

void ModelDrafter::trim(State& s, int64_t length) {
  const int page = model_->pages().page_size();
  s.sequence.length = std::min(s.sequence.length, length);
  s.cached.resize(size_t(s.sequence.length));
  const size_t need = size_t((s.sequence.length + page - 1) / page);
  while (s.sequence.pages.size() > need) model_->pages().release(s.sequence.pages.back()), s.sequence.pages.pop_back();
}

void ModelDrafter::run(std::vector<model::Model::Chunk>& chunks, std::vector<std::vector<float>>* logits) {
  if (chunks.empty()) return;
  for (const model::Model::Chunk& c : chunks) computed_tokens_ += int64_t(c.tokens.size());
  if (logits) {
    *logits = model_->step(chunks);
  } else {
    model_->step_greedy(chunks);  // only the K/V matter: on a GPU no logits leave the device
  }
  chunks.clear();
}

std::vector<Draft> ModelDrafter::propose(std::span<const DraftRequest> requests) {
  std::vector<Draft> out(requests.size());
  const model::ModelOptions& o = model_->options();
  const int page = model_->pages().page_size();
  const int64_t vocab = model_->config().vocab;

  // Each cache back to what it shares with its request's tokens (the rejected drafts of the last
  // step go; the last token is always run again, for its logits), then the pages for the rest —
  // or, when the pool cannot hold them, no drafts for that request and its cache let go.
  std::vector<size_t> active;
  std::vector<State*> state(requests.size(), nullptr);
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.k < 1 || r.tokens.empty()) continue;
    State& s = states_[r.id];
    const size_t shared = size_t(
        std::mismatch(s.cached.begin(), s.cached.end(), r.tokens.begin(), r.tokens.end()).first - s.cached.begin());
    trim(s, std::min<int64_t>(int64_t(shared), int64_t(r.tokens.size()) - 1));
    const int64_t length = int64_t(r.tokens.size()) + r.k - 1;  // the tokens, then all drafts but the last
    const int64_t more = (length + page - 1) / page - int64_t(s.sequence.pages.size());
    if (more > model_->pages().free_pages()) {
      release(r.id);
      continue;
    }
    for (int64_t n = 0; n < more; ++n) s.sequence.pages.push_back(*model_->pages().allocate());
    state[i] = &s;
    active.push_back(i);
  }

  // Catch-up: every token but the last, in steps within the model's limits.
  std::vector<model::Model::Chunk> chunks;
  for (;;) {
    int64_t budget = o.max_batch_tokens;
    for (size_t i : active) {
      State& s = *state[i];
      const int64_t missing = int64_t(requests[i].tokens.size()) - 1 - s.sequence.length;
      if (missing <= 0 || budget <= 0 || int(chunks.size()) >= o.max_sequences) continue;
      const int64_t n = std::min(missing, budget);
      const std::span<const int32_t> fed = requests[i].tokens.subspan(size_t(s.sequence.length), size_t(n));
      chunks.push_back({&s.sequence, fed});
      s.cached.insert(s.cached.end(), fed.begin(), fed.end());
      budget -= n;
    }
    if (chunks.empty()) break;
    run(chunks, nullptr);
  }

  // Round j feeds each request's last token (j = 0) or its draft j − 1 and draws draft j from
  // the logits, for the requests that want more than j drafts.
  int k_max = 0;
  for (size_t i : active) k_max = std::max(k_max, requests[i].k);
  const size_t group = size_t(std::min<int64_t>(o.max_sequences, o.max_batch_tokens));
  std::vector<std::vector<int>> history(requests.size());  // the output, then the drafts so far
  for (size_t i : active)
    history[i].assign(requests[i].tokens.begin() + requests[i].prompt_length, requests[i].tokens.end());
  std::vector<bool> unsure(requests.size(), false);  // drafting stopped below p_min
  for (int j = 0; j < k_max; ++j) {
    std::vector<size_t> round;
    for (size_t i : active) {
      if (requests[i].k > j && !unsure[i]) round.push_back(i);
    }
    for (size_t begin = 0; begin < round.size(); begin += group) {
      const size_t end = std::min(round.size(), begin + group);
      std::vector<int32_t> fed(end - begin);
      for (size_t g = begin; g < end; ++g) {
        const size_t i = round[g];
        fed[g - begin] = j == 0 ? requests[i].tokens.back() : out[i].tokens.back();
        chunks.push_back({&state[i]->sequence, std::span(&fed[g - begin], 1)});
        state[i]->cached.push_back(fed[g - begin]);
      }
      std::vector<std::vector<float>> logits;
      run(chunks, &logits);
      for (size_t g = begin; g < end; ++g) {
        const size_t i = round[g];
        const DraftRequest& r = requests[i];
        cpu::SamplingParams p = *r.sampling;
        p.logprobs = 0;
        const std::span<const int> prompt(r.tokens.data(), size_t(r.prompt_length));
        const uint64_t step = uint64_t(history[i].size());
        const float* row = logits[g - begin].data();
        int32_t token = 0;
        if (p.temperature < cpu::kGreedyTemperature) {
          // Its confidence: the most likely token's probability under the raw logits.
          if (p_min_ > 0 && top_probability(row, vocab) < p_min_) {
            unsure[i] = true;
            continue;
          }
          token = cpu::sample(row, vocab, p, prompt, history[i], step, false).token;
        } else {
          const auto q = cpu::sampling_distribution(row, vocab, p, prompt, history[i]);
          // Decided on q alone, before the draw: the proposal stays a function of the draft's own
          // distribution and randomness, so rejection sampling keeps the target's distribution.
          if (p_min_ > 0) {
            double top = 0;
            for (const auto& [id, mass] : q) top = std::max(top, double(mass));
            if (top < p_min_) {
              unsure[i] = true;
              continue;
            }
          }
          token = draw(q, random_uniform(p.seed, step, RandomStream::kDraft));
          std::vector<float>& dense = out[i].q.emplace_back(size_t(vocab), 0.0f);
          for (const auto& [id, mass] : q) dense[size_t(id)] = float(mass);
        }
        out[i].tokens.push_back(token);
        history[i].push_back(token);
      }
    }
  }
  return out;
}

std::optional<std::string> draft_directory(const std::string& speculative) {
  if (!speculative.starts_with("draft:") || speculative.size() <= 6) return std::nullopt;
  return speculative.substr(6);
}

void leave_room_for_draft(model::ModelOptions& target, const EngineOptions& engine) {
  const std::optional<std::string> draft = draft_directory(engine.speculative);
  if (engine.num_speculative_tokens <= 0 || !draft || target.device != model::Device::kCuda ||
      target.kv_cache_tokens != 0) {
    return;
  }
  const std::string& dir = *draft;
  if (!std::filesystem::is_directory(dir)) return;  // make_drafter refuses it in one sentence
  const models::ModelConfig c = models::load_model(dir);
  target.draft_page_bytes = 2 * size_t(c.layers) * size_t(c.kv_heads) * size_t(c.head_dim) * size_t(target.page_size) *
                            size_t(models::kv_cache_element_bytes(target.kv_cache_dtype));
  size_t weights = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors") weights += entry.file_size();
  }
  // A step's fp32 logits and its gathered rows, the activations (fp16, a dozen rows of hidden
  // or intermediate width per token), and room for the workspaces and CUDA graphs.
  const size_t tokens = size_t(target.max_batch_tokens);
  const size_t buffers = tokens * (4 * size_t(c.vocab) + 2 * (12 * size_t(c.hidden) + 2 * size_t(c.intermediate)));
  target.draft_bytes = weights + buffers + (size_t(256) << 20);
}

}  // namespace onecat::engine
