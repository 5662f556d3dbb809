// Tool calls in generated text, Hermes's format as Qwen2.5/Qwen3 templates ask for it:
//   some text<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>…
// The text before the first block is the message's content; each block is one call. As vLLM's
// hermes parser does: a block that is not a JSON object with a string "name" makes the whole
// text plain content (no calls), and the last block may lack its closing tag (generation
// stopped there).
#pragma once
#include <optional>
#include <string>
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

}  // namespace onecat::serve
