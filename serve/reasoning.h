// Reasoning content of thinking models (Qwen3, DeepSeek-R1): a reply that begins with <think>
// (after whitespace) holds its reasoning up to </think>; the rest is the answer. Works on text
// pieces as they stream: text that could still be the start of <think> or </think> is held back.
// A reply that does not begin with <think> is all answer, unless the prompt already opened it:
// templates that end their generation prompt with <think> (DeepSeek-R1 and its distills,
// Qwen3's 2507 thinking models) have the reply start inside the reasoning, up to </think>
// (opens_reasoning, the `opened` splitter; a reply that never closes it is all reasoning).
#pragma once
#include <string>
#include <string_view>

namespace onecat::serve {

// Whether a rendered prompt leaves the reply inside <think> (it ends with <think>, blanks aside).
bool opens_reasoning(std::string_view prompt);

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool opened = false) : phase_(opened ? Phase::kReasoning : Phase::kStart) {}
  struct Delta {
    std::string reasoning, content;
  };
  Delta step(const std::string& piece);
  Delta finish();  // the end of the reply: whatever was held back
  // Whole text at once: reasoning (empty: none) and content.
  static Delta split(const std::string& text, bool opened = false);

 private:
  enum class Phase { kStart, kReasoning, kContent };
  Phase phase_;
  std::string held_;
};

}  // namespace onecat::serve
