#include "models/model/generate.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace onecat::model {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Gives the pages back however generation ends.
class SequenceGuard {
 public:
  SequenceGuard(Model& model, Sequence& sequence) : model_(model), sequence_(sequence) {}
  ~SequenceGuard() { model_.release(sequence_); }
  SequenceGuard(const SequenceGuard&) = delete;
  SequenceGuard& operator=(const SequenceGuard&) = delete;

 private:
  Model& model_;
  Sequence& sequence_;
};

}  // namespace

GenerateResult generate(Model& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw InputError("the prompt has no tokens.");
  if (options.max_tokens < 1) throw InputError("max_tokens must be at least 1.");
  cpu::validate(options.sampling);
  const int64_t vocab = model.config().vocab;
  const int64_t capacity = model.pages().pages() * model.pages().page_size();
  // The last new token is never fed back, so the cache holds prompt + max_tokens − 1.
  if (int64_t(prompt.size()) + options.max_tokens - 1 > capacity) {
    throw InputError("the prompt (" + std::to_string(prompt.size()) + " tokens) and max_tokens (" +
                     std::to_string(options.max_tokens) + ") need more than the KV cache's " +
                     std::to_string(capacity) + " tokens.");
  }
  GenerateResult result;
  Sequence sequence;
  SequenceGuard guard(model, sequence);
  const std::vector<int> history(prompt.begin(), prompt.end());
  std::vector<int> output;

  // Plain greedy needs only each step's argmax: the backend computes it where the logits are
  // (on the GPU, 4 bytes leave the device instead of the vocabulary's logits).
  const bool plain_greedy = cpu::plain_greedy(options.sampling);
  auto start = std::chrono::steady_clock::now();
  std::vector<float> logits;
  int32_t greedy_next = 0;
  if (plain_greedy) {
    greedy_next = model.extend_greedy(sequence, prompt);
  } else {
    logits = model.extend(sequence, prompt);
  }
  result.prefill_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  for (;;) {
    const int32_t token =
        plain_greedy
            ? greedy_next
            : cpu::sample(logits.data(), vocab, options.sampling, history, output, uint64_t(output.size())).token;
    output.push_back(token);
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), token) != options.stop_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    if (int64_t(result.tokens.size()) >= options.max_tokens) {
      result.finish_reason = "length";
      break;
    }
    if (plain_greedy) {
      greedy_next = model.extend_greedy(sequence, std::span(&token, 1));
    } else {
      logits = model.extend(sequence, std::span(&token, 1));
    }
    ++result.decode_steps;
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace onecat::model
