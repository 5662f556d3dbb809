#include "serve/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace onecat::serve {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = kToolCallClose;

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// The length of the longest tail of `text` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// One block's text as a call: a JSON object with a string "name" (arguments "{}" when absent).
std::optional<ToolCall> parse_block(std::string_view block) {
  const nlohmann::json j = nlohmann::json::parse(block, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call{j["name"].get<std::string>(), "{}"};
  if (j.contains("arguments") && !j["arguments"].is_null()) {
    call.arguments = j["arguments"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return call;
}

}  // namespace

ParsedToolCalls parse_tool_calls(const std::string& text) {
  ParsedToolCalls plain{text, {}};
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

std::string forced_tool_call(const std::optional<std::string>& function) {
  std::string text = std::string(kOpen) + "\n";
  if (function) text += "{\"name\": " + nlohmann::json(*function).dump() + ", \"arguments\": ";
  return text;
}

void ToolCallStream::take_block(std::string_view block, bool closed, Delta& d) {
  if (std::optional<ToolCall> call = parse_block(block)) {
    d.calls.push_back(std::move(*call));
    ++calls_;
    return;
  }
  d.content += std::string(kOpen) + std::string(block) + (closed ? std::string(kClose) : std::string());
}

ToolCallStream::Delta ToolCallStream::step(const std::string& piece) {
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
  if (phase_ == Phase::kContent) {
    d.content = held_;  // no block came: all of it is content, whitespace too
  } else if (phase_ == Phase::kBlock) {
    take_block(held_, false, d);
  }
  held_.clear();
  return d;
}

}  // namespace onecat::serve
