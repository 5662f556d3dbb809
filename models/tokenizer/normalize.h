// The normalizer of a Hugging Face tokenizer.json: text → normalized text, applied to each
// stretch of input between added tokens.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace onecat::tokenizer {

class NormalizerStep {
 public:
  virtual ~NormalizerStep() = default;
  virtual void apply(std::string& text) const = 0;
};

class Normalizer {
 public:
  Normalizer() = default;
  // From tokenizer.json's "normalizer" (null → identity). Error naming an unsupported type.
  static Normalizer from_json(const nlohmann::json& j);

  bool empty() const { return steps_.empty(); }
  std::string apply(std::string text) const;

 private:
  void add(const nlohmann::json& j);
  std::vector<std::shared_ptr<const NormalizerStep>> steps_;
};

}  // namespace onecat::tokenizer
