// The decoder of a Hugging Face tokenizer.json: token strings → text, step by step as
// tokenizers chains them (each step maps a list of strings to a list of strings).
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace onecat::tokenizer {

class DecoderStep {
 public:
  virtual ~DecoderStep() = default;
  // lossy: invalid UTF-8 becomes U+FFFD (the text); otherwise bytes stay as they are.
  virtual void apply(std::vector<std::string>& tokens, bool lossy) const = 0;
};

class Decoder {
 public:
  Decoder() = default;
  // From tokenizer.json's "decoder"; null joins the tokens with spaces, as tokenizers does.
  static Decoder from_json(const nlohmann::json& j);

  // lossy = false keeps the bytes of an incomplete or invalid UTF-8 sequence as they are.
  std::string decode(std::vector<std::string> tokens, bool lossy = true) const;
  // Whether <0xXX> tokens are read as bytes; a run of them decodes as a whole (one
  // U+FFFD per byte when the run is not valid UTF-8), so its text is not final until the
  // run ends.
  bool has_byte_fallback() const { return byte_fallback_; }

 private:
  void add(const nlohmann::json& j);
  std::vector<std::shared_ptr<const DecoderStep>> steps_;
  bool present_ = false;
  bool byte_fallback_ = false;
};

}  // namespace onecat::tokenizer
