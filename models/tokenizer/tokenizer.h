// Text ↔ token ids, identical to Hugging Face `tokenizers` for the BPE tokenizers of
// today's checkpoints (byte-level BPE as in Llama 3, Qwen and GPT-2; SentencePiece-style
// BPE with byte fallback as in Llama 2, Mistral and Phi-3). Loads a checkpoint directory
// (tokenizer.json + tokenizer_config.json) or a GGUF file's tokenizer metadata. Immutable
// once loaded; copies share it, and encode/decode may run on many threads at once.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace onecat::tokenizer {

struct TokenizerDefinition;

class Tokenizer {
 public:
  // A checkpoint directory or a .gguf file. InputError when the files are missing or
  // malformed; Error naming the component when the tokenizer uses one onecat lacks.
  static Tokenizer load(const std::filesystem::path& model);
  static Tokenizer from_hf_directory(const std::filesystem::path& dir);
  static Tokenizer from_gguf(const std::filesystem::path& file);
  // tokenizer.json text (and optionally tokenizer_config.json text).
  static Tokenizer from_hf_json(const std::string& tokenizer_json, const std::string& tokenizer_config_json = "");
  explicit Tokenizer(TokenizerDefinition definition);

  // With add_special_tokens, the checkpoint's template (e.g. BOS first) is applied.
  // InputError when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // InputError for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Every id's bytes as they continue a text (ids 0 … vocab_size() − 1): a byte-level token's
  // raw bytes (part of a UTF-8 character stays a part), a byte-fallback token's byte, a
  // SentencePiece token's text with its leading space. Empty for added tokens (special or not:
  // they are never text to a grammar) and for ids the vocabulary lacks. Constrained decoding
  // (engine/grammar.h) walks these.
  std::vector<std::string> token_bytes() const;

  size_t vocab_size() const;  // one past the largest id
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // A byte-fallback token (<0xXX>): its text depends on the byte tokens that follow it.
  bool is_fallback_byte(int32_t id) const;
  std::optional<int32_t> bos_token_id() const;
  const std::vector<int32_t>& eos_token_ids() const;  // every id that ends generation

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace onecat::tokenizer
