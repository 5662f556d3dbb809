// What ends generation for a checkpoint without (or beside) its tokenizer: the stop ids of
// generation_config.json's eos_token_id, else config.json's (an id or a list of ids).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onecat::model {

// Empty when neither file names one. InputError (naming the file and field) for a malformed
// value.
std::vector<int32_t> eos_token_ids(const std::string& checkpoint_directory);

// The sampling defaults a checkpoint's authors recommend (generation_config.json), which a
// server applies to requests that leave a field out, as vLLM's `--generation-config auto` does:
// temperature, top_k, top_p, min_p, repetition_penalty and max_new_tokens (a request's default
// max_tokens). Like vLLM (transformers' GenerationConfig.to_diff_dict), a value equal to
// transformers' own default (temperature 1, top_k 50, top_p 1, repetition_penalty 1) is not a
// recommendation and is left out; do_sample is not read.
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<int64_t> max_tokens;

  bool empty() const;
  std::string describe() const;  // "temperature 0.6, top_k 20, top_p 0.95"; "" when empty
};

// `source`: "auto" (the checkpoint's generation_config.json), "vllm" (none: the API's neutral
// defaults) or a directory holding a generation_config.json. No file: empty defaults. A file
// that is not JSON, or a field of the wrong type or out of range: InputError naming both.
SamplingDefaults sampling_defaults(const std::string& checkpoint_directory, const std::string& source = "auto");

// vLLM's --override-generation-config: a JSON object of the same fields (max_new_tokens for
// max_tokens) put over `defaults`; InputError for other text, an unknown field or a bad value.
void override_sampling_defaults(SamplingDefaults& defaults, const std::string& json_text);

}  // namespace onecat::model
