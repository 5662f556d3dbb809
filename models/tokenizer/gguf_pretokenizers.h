// GGUF names a pre-tokenizer (tokenizer.ggml.pre) instead of describing it. This table
// gives, for each supported name, the pre-tokenizer and normalizer of that model family's
// Hugging Face tokenizer.json, so a GGUF tokenizes exactly as the checkpoint it came from.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace onecat::tokenizer {

struct GgufPreTokenizer {
  nlohmann::json pre_tokenizer, normalizer;  // tokenizer.json form; null when absent
  bool ignore_merges = false;
  bool add_bos_by_default = false;  // when the GGUF does not say
};

// nullopt for a name onecat does not know.
std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& name);

}  // namespace onecat::tokenizer
