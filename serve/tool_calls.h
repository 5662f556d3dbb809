// Tool calls in generated text, Hermes's format as Qwen2.5/Qwen3 templates ask for it:
//   some text<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>…
// The text before the first block is the message's content; each block is one call. As vLLM's
// hermes parser does: a block that is not a JSON object with a string "name" makes the whole
// text plain content (no calls), and the last block may lack its closing tag (generation
// stopped there).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace onecat::serve {

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of the call's arguments ("{}" when it has none)
};

struct ParsedToolCalls {
  std::optional<std::string> content;  // nullopt: no text besides the calls
  std::vector<ToolCall> calls;
};

ParsedToolCalls parse_tool_calls(const std::string& text);

// The start of a reply that must be a tool call (tool_choice "required", or a named function's):
// a block opened as Qwen's templates ask for it, "<tool_call>\n", and for a named function
// `{"name": "NAME", "arguments": ` after it (NAME as a JSON string). The model writes the rest;
// the reply parsed is this text followed by the generated one.
std::string forced_tool_call(const std::optional<std::string>& function);
// The tag that closes a block (a named function's call is over once it comes).
inline constexpr std::string_view kToolCallClose = "</tool_call>";

// The same on text pieces as they stream. Text before the first block streams as content (a
// tail that could still begin "<tool_call>" held back, and leading whitespace held until other
// text follows, as parse_tool_calls drops a blank prefix); each block is held until its closing
// tag and then given as one call. Unlike parse_tool_calls it cannot take back what it sent: a
// block that does not parse is given as content, tags included, and the calls before it stay
// calls. Text between or after blocks is dropped, as there.
class ToolCallStream {
 public:
  struct Delta {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Delta step(const std::string& piece);
  Delta finish();  // the end of the reply: an unclosed last block is parsed as it stands
  bool any_call() const { return calls_ > 0; }

 private:
  void take_block(std::string_view block, bool closed, Delta& d);
  enum class Phase { kContent, kBlock, kBetween };
  Phase phase_ = Phase::kContent;
  std::string held_;  // content not yet sent, a block's text, or text after a block
  bool sent_text_ = false;
  int calls_ = 0;
};

}  // namespace onecat::serve
