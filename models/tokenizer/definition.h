// Everything a tokenizer is made of, as the loaders (tokenizer.json, GGUF) produce it. The
// small components keep tokenizer.json's own JSON form, so both loaders share one parser.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe.h"
#include "models/tokenizer/vocab.h"

namespace onecat::tokenizer {

struct TokenizerDefinition {
  nlohmann::json normalizer, pre_tokenizer, post_processor, decoder;  // null when absent
  Vocab vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  BpeOptions bpe;
  std::vector<AddedToken> added_tokens;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
};

}  // namespace onecat::tokenizer
