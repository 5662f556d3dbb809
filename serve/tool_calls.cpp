#include "serve/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "models/chat/ordered_json.h"
#include "serve/openai_request.h"

namespace onecat::serve {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = kToolCallClose;
// Llama 3.1's and Mistral's tags before calls (special tokens, so usually skipped from the text).
constexpr std::string_view kPythonTag = "<|python_tag|>", kMistralTag = "[TOOL_CALLS]";

std::string_view after_blanks(std::string_view s) {
  const size_t at = s.find_first_not_of(" \t\r\n");
  return at == std::string_view::npos ? std::string_view() : s.substr(at);
}

bool blank(std::string_view s) { return after_blanks(s).empty(); }

// `text` past its leading blanks, and past `tag` and the blanks after it where it opens with it.
std::string_view after_tag(std::string_view text, std::string_view tag) {
  text = after_blanks(text);
  return text.substr(0, tag.size()) == tag ? after_blanks(text.substr(tag.size())) : text;
}

// The end of the JSON object or array that opens `text` (past its closing bracket), npos if it
// never closes: brackets counted outside strings.
size_t object_end(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The length of the longest tail of `text` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// The model's JSON with its keys in the order it wrote them (arguments go out so, as vLLM's
// json.dumps of a parsed dict keeps them); nullopt when it is not JSON or nests deeper than a
// request may (dumping it again recurses once a level).
std::optional<nlohmann::ordered_json> output_json(std::string_view text) {
  if (chat::json_nests_deeper(text, kMaxJsonDepth)) return std::nullopt;
  try {
    return chat::parse_ordered_json(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// One block's text as a call: a JSON object with a string "name" (arguments "{}" when absent);
// llama3_json also takes its arguments from "parameters".
std::optional<ToolCall> parse_block(std::string_view block, ToolCallFormat format = ToolCallFormat::kHermes) {
  const std::optional<nlohmann::ordered_json> parsed = output_json(block);
  if (!parsed) return std::nullopt;
  const nlohmann::ordered_json& j = *parsed;
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call{j["name"].get<std::string>(), "{}"};
  const char* key = format == ToolCallFormat::kLlama3Json && !j.contains("arguments") ? "parameters" : "arguments";
  if (j.contains(key) && !j[key].is_null()) {
    call.arguments = j[key].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  return call;
}

// mistral: the whole text as calls ("[{…}, {…}]", an optional [TOOL_CALLS] first), or nullopt.
std::optional<std::vector<ToolCall>> array_calls(std::string_view text) {
  text = after_tag(text, kMistralTag);
  if (text.empty() || text[0] != '[') return std::nullopt;
  const size_t end = object_end(text);
  if (end == std::string_view::npos || !blank(text.substr(end))) return std::nullopt;
  const std::optional<nlohmann::ordered_json> array = output_json(text.substr(0, end));
  if (!array || !array->is_array() || array->empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const nlohmann::ordered_json& item : *array) {
    std::optional<ToolCall> call = parse_block(item.dump());
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

// llama3_json: the whole text as calls ("{…}; {…}", an optional <|python_tag|> first), or
// nullopt when it is not calls throughout; mistral: array_calls.
std::optional<std::vector<ToolCall>> json_calls(std::string_view text, ToolCallFormat format) {
  if (format == ToolCallFormat::kMistral) return array_calls(text);
  text = after_tag(text, kPythonTag);
  std::vector<ToolCall> calls;
  while (!text.empty() && text[0] == '{') {
    const size_t end = object_end(text);
    if (end == std::string_view::npos) return std::nullopt;
    std::optional<ToolCall> call = parse_block(text.substr(0, end), ToolCallFormat::kLlama3Json);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    text = after_blanks(text.substr(end));
    if (text.empty()) return calls;
    if (text[0] != ';') return std::nullopt;
    text = after_blanks(text.substr(1));
    if (text.empty()) return calls;
  }
  return std::nullopt;
}

}  // namespace

ToolCallFormat parse_tool_call_format(const std::string& name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (name == "mistral") return ToolCallFormat::kMistral;
  throw InputError(
      "--tool-call-parser must be hermes (Hermes/Qwen <tool_call> JSON blocks), llama3_json (Llama 3.1–3.3's "
      "JSON calls) or mistral ([TOOL_CALLS] and a JSON array), not " +
      quoted_input(name) + ".");
}

std::string_view forced_call_suffix(ToolCallFormat format, bool named) {
  if (format == ToolCallFormat::kMistral) return named ? "}]" : "]";
  return named ? "}" : "";
}

const char* arguments_key(ToolCallFormat format) {
  return format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
}

ParsedToolCalls parse_tool_calls(const std::string& text, ToolCallFormat format) {
  ParsedToolCalls plain{text, {}};
  if (format != ToolCallFormat::kHermes) {
    std::optional<std::vector<ToolCall>> calls = json_calls(text, format);
    return calls ? ParsedToolCalls{std::nullopt, std::move(*calls)} : plain;
  }
  size_t at = text.find(kOpen);
  if (at == std::string::npos) return plain;
  ParsedToolCalls out;
  if (!blank(std::string_view(text).substr(0, at))) out.content = text.substr(0, at);
  while (at != std::string::npos) {
    const size_t body = at + kOpen.size();
    const size_t close = text.find(kClose, body);
    std::optional<ToolCall> call =
        parse_block(std::string_view(text).substr(body, close == std::string::npos ? std::string::npos : close - body));
    if (!call) return plain;
    out.calls.push_back(std::move(*call));
    if (close == std::string::npos) break;
    at = text.find(kOpen, close + kClose.size());
    // Text between or after blocks is not the message's content (vLLM drops it too), unless a
    // later block fails to parse.
  }
  return out;
}

std::string forced_tool_call(const std::optional<std::string>& function, ToolCallFormat format) {
  const std::string named =
      function ? "{\"name\": " + nlohmann::json(*function).dump() + ", \"" + arguments_key(format) + "\": " : "";
  if (format == ToolCallFormat::kLlama3Json) return named;
  if (format == ToolCallFormat::kMistral) return std::string(kMistralTag) + "[" + named;
  return std::string(kOpen) + "\n" + named;
}

void ToolCallStream::take_block(std::string_view block, bool closed, Delta& d) {
  if (std::optional<ToolCall> call = parse_block(block)) {
    d.calls.push_back(std::move(*call));
    ++calls_;
    return;
  }
  d.content += std::string(kOpen) + std::string(block) + (closed ? std::string(kClose) : std::string());
}

ToolCallStream::Delta ToolCallStream::step_json(const std::string& piece) {
  Delta d;
  held_ += piece;
  if (phase_ == Phase::kBlock) return d;  // calls, maybe: parsed whole at the end
  if (!sent_text_) {
    const std::string_view rest = after_blanks(held_);
    if (rest.empty()) return d;
    const bool mistral = format_ == ToolCallFormat::kMistral;
    const std::string_view tag = mistral ? kMistralTag : kPythonTag;
    if (rest[0] == (mistral ? '[' : '{') || rest.substr(0, tag.size()) == tag) {
      phase_ = Phase::kBlock;
      return d;
    }
    if (tag.substr(0, rest.size()) == rest) return d;  // the tag, perhaps
    sent_text_ = true;
  }
  d.content = std::move(held_);
  held_.clear();
  return d;
}

ToolCallStream::Delta ToolCallStream::step(const std::string& piece) {
  if (format_ != ToolCallFormat::kHermes) return step_json(piece);
  Delta d;
  held_ += piece;
  for (;;) {
    if (phase_ == Phase::kContent) {
      const size_t at = held_.find(kOpen);
      if (at != std::string::npos) {
        if (sent_text_ || !blank(std::string_view(held_).substr(0, at))) d.content += held_.substr(0, at);
        held_.erase(0, at + kOpen.size());
        phase_ = Phase::kBlock;
        continue;
      }
      const size_t keep = partial_tag(held_, kOpen);
      const std::string_view ready = std::string_view(held_).substr(0, held_.size() - keep);
      if (!sent_text_ && blank(ready)) return d;  // whitespace so far: it may precede a call
      d.content += ready;
      sent_text_ = true;
      held_.erase(0, ready.size());
      return d;
    }
    if (phase_ == Phase::kBlock) {
      const size_t close = held_.find(kClose);
      if (close == std::string::npos) return d;
      take_block(std::string_view(held_).substr(0, close), true, d);
      held_.erase(0, close + kClose.size());
      phase_ = Phase::kBetween;
      continue;
    }
    // Between or after blocks: only another block counts.
    const size_t at = held_.find(kOpen);
    if (at == std::string::npos) {
      held_.erase(0, held_.size() - partial_tag(held_, kOpen));
      return d;
    }
    held_.erase(0, at + kOpen.size());
    phase_ = Phase::kBlock;
  }
}

ToolCallStream::Delta ToolCallStream::finish() {
  Delta d;
  if (format_ != ToolCallFormat::kHermes) {
    std::optional<std::vector<ToolCall>> calls;
    if (phase_ == Phase::kBlock) calls = json_calls(held_, format_);
    if (calls) {
      calls_ += int(calls->size());
      d.calls = std::move(*calls);
    } else {
      d.content = std::move(held_);
    }
    held_.clear();
    return d;
  }
  if (phase_ == Phase::kContent) {
    d.content = held_;  // no block came: all of it is content, whitespace too
  } else if (phase_ == Phase::kBlock) {
    take_block(held_, false, d);
  }
  held_.clear();
  return d;
}

}  // namespace onecat::serve
