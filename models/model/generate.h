// One sequence, start to end: the prompt prefilled (in chunks of the model's
// max_batch_tokens), then one decode step per new token, each token chosen by the sampling
// family's CPU reference (greedy at temperature 0) until a stop id or max_tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/model/model.h"
#include "runtime/cpu/sampling.h"

namespace onecat::model {

struct GenerateOptions {
  int64_t max_tokens = 64;
  cpu::SamplingParams sampling = greedy();
  std::vector<int32_t> stop_ids;  // e.g. eos_token_ids(); generation ends after one of them

  static cpu::SamplingParams greedy() {
    cpu::SamplingParams p;
    p.temperature = 0;
    return p;
  }
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens, a stop id last if one ended it
  std::string finish_reason;    // "stop" (a stop id) or "length" (max_tokens)
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t decode_steps = 0;  // forward steps after the prefill

  double decode_tokens_per_second() const { return decode_seconds > 0 ? double(decode_steps) / decode_seconds : 0; }
};

// InputError for an empty prompt, max_tokens < 1, bad sampling settings, an id outside the
// vocabulary, or a prompt + max_tokens beyond the KV cache. on_token sees each new token as it
// is chosen. The sequence's pages are released at the end (also on error).
GenerateResult generate(Model& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token = {});

}  // namespace onecat::model
