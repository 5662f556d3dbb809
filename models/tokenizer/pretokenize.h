// The pre-tokenizer of a Hugging Face tokenizer.json: normalized text → words, each of
// which the model encodes on its own.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace onecat::tokenizer {

struct Piece {
  std::string text;
  bool at_origin;  // starts at offset 0 of the original input (Metaspace's "first" scheme)
};

class PreTokenizerStep {
 public:
  virtual ~PreTokenizerStep() = default;
  virtual void split(Piece&& in, std::vector<Piece>& out) const = 0;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  // From tokenizer.json's "pre_tokenizer" (null → the whole text is one word).
  // Error naming an unsupported type or option.
  static PreTokenizer from_json(const nlohmann::json& j);

  void split(Piece piece, std::vector<Piece>& words) const;

  // True when a final ByteLevel step left its words as raw bytes: the model then reads
  // them in the byte-level alphabet itself, which saves re-encoding every word.
  bool words_are_raw_bytes() const { return words_are_raw_bytes_; }

 private:
  void add(const nlohmann::json& j);
  std::vector<std::shared_ptr<const PreTokenizerStep>> steps_;
  bool words_are_raw_bytes_ = false;
  std::optional<std::pair<bool, bool>> trailing_byte_level_;  // add_prefix_space, use_regex
};

}  // namespace onecat::tokenizer
