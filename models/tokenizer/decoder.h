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
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

class Decoder {
 public:
  Decoder() = default;
  // From tokenizer.json's "decoder"; null joins the tokens with spaces, as tokenizers does.
  static Decoder from_json(const nlohmann::json& j);

  std::string decode(std::vector<std::string> tokens) const;

 private:
  void add(const nlohmann::json& j);
  std::vector<std::shared_ptr<const DecoderStep>> steps_;
  bool present_ = false;
};

}  // namespace onecat::tokenizer
