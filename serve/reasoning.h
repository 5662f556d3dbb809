// Reasoning content of thinking models (Qwen3, DeepSeek-R1): a reply that begins with <think>
// (after whitespace) holds its reasoning up to </think>; the rest is the answer. Works on text
// pieces as they stream: text that could still be the start of <think> or </think> is held back.
// A reply that does not begin with <think> is all answer (so a template that opens <think> in
// the prompt, as Qwen3's 2507 thinking models do, is not split).
#pragma once
#include <string>

namespace onecat::serve {

class ReasoningSplitter {
 public:
  struct Delta {
    std::string reasoning, content;
  };
  Delta step(const std::string& piece);
  Delta finish();  // the end of the reply: whatever was held back
  // Whole text at once: reasoning (empty: none) and content.
  static Delta split(const std::string& text);

 private:
  enum class Phase { kStart, kReasoning, kContent };
  Phase phase_ = Phase::kStart;
  std::string held_;
};

}  // namespace onecat::serve
