// Tool calls in generated text, in the formats vLLM's --tool-call-parser names:
// - hermes, as Qwen2.5/Qwen3 templates ask for it:
//     some text<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>…
//   The text before the first block is the message's content; each block is one call. As vLLM's
//   hermes parser does: a block that is not a JSON object with a string "name" makes the whole
//   text plain content (no calls), and the last block may lack its closing tag (generation
//   stopped there).
// - llama3_json, as Llama 3.1–3.3 templates ask for it: the whole reply is the call(s), JSON
//   objects {"name": …, "parameters": {…}} ("arguments" also taken) separated by ";", after an
//   optional <|python_tag|>. A reply that does not start with "{" (blanks aside) is content; one
//   that does but is not such calls throughout is content too, as in vLLM.
// - mistral, as Mistral-7B-Instruct-v0.3's and Mistral-Nemo's templates ask for it: the reply
//   is [TOOL_CALLS] and a JSON array of {"name", "arguments"} objects ([TOOL_CALLS] is a special
//   token, so usually skipped from the text: an array first is enough). Otherwise as
//   llama3_json.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace onecat::serve {

enum class ToolCallFormat { kHermes, kLlama3Json, kMistral };

// "hermes", "llama3_json" or "mistral"; InputError naming them otherwise.
ToolCallFormat parse_tool_call_format(const std::string& name);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of the call's arguments ("{}" when it has none)
};

struct ParsedToolCalls {
  std::optional<std::string> content;  // nullopt: no text besides the calls
  std::vector<ToolCall> calls;
};

ParsedToolCalls parse_tool_calls(const std::string& text, ToolCallFormat format = ToolCallFormat::kHermes);

// The start of a reply that must be a tool call (tool_choice "required", or a named function's).
// hermes: a block opened as Qwen's templates ask for it, "<tool_call>\n", and for a named
// function `{"name": "NAME", "arguments": ` after it (NAME as a JSON string); llama3_json:
// nothing, or `{"name": "NAME", "parameters": `; mistral: `[TOOL_CALLS][`, and the same object's
// start for a named function. The model writes the rest; the reply parsed is this text
// followed by the generated one.
std::string forced_tool_call(const std::optional<std::string>& function,
                             ToolCallFormat format = ToolCallFormat::kHermes);
// What closes a forced call after its arguments (named) or after the one call object
// ("required"): "}" and "" but for mistral's array, "}]" and "]".
std::string_view forced_call_suffix(ToolCallFormat format, bool named);
// The key of a call's arguments in the format ("arguments", llama3_json's "parameters").
const char* arguments_key(ToolCallFormat format);
// hermes's tag that closes a block (a named function's call is over once it comes).
inline constexpr std::string_view kToolCallClose = "</tool_call>";

// The same on text pieces as they stream. Text before the first block streams as content (a
// tail that could still begin "<tool_call>" held back, and leading whitespace held until other
// text follows, as parse_tool_calls drops a blank prefix); each block is held until its closing
// tag and then given as one call. Unlike parse_tool_calls it cannot take back what it sent: a
// block that does not parse is given as content, tags included, and the calls before it stay
// calls. Text between or after blocks is dropped, as there.
// llama3_json: text that may be calls is held to the end of the reply, then parsed whole (or
// given as content); other text streams as it comes.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format = ToolCallFormat::kHermes) : format_(format) {}
  struct Delta {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Delta step(const std::string& piece);
  Delta finish();  // the end of the reply: an unclosed last block is parsed as it stands
  bool any_call() const { return calls_ > 0; }

 private:
  void take_block(std::string_view block, bool closed, Delta& d);
  Delta step_json(const std::string& piece);
  ToolCallFormat format_;
  enum class Phase { kContent, kBlock, kBetween };
  Phase phase_ = Phase::kContent;
  std::string held_;  // content not yet sent, a block's text, or text after a block
  bool sent_text_ = false;
  int calls_ = 0;
};

}  // namespace onecat::serve
