#include "serve/tool_calls.h"

#include <nlohmann/json.hpp>

namespace onecat::serve {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

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
    const std::string block = text.substr(body, close == std::string::npos ? std::string::npos : close - body);
    const nlohmann::json j = nlohmann::json::parse(block, nullptr, false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return plain;
    ToolCall call{j["name"].get<std::string>(), "{}"};
    if (j.contains("arguments") && !j["arguments"].is_null()) {
      call.arguments = j["arguments"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    out.calls.push_back(std::move(call));
    if (close == std::string::npos) break;
    at = text.find(kOpen, close + kClose.size());
    // Text between or after blocks is not the message's content (vLLM drops it too), unless a
    // later block fails to parse.
  }
  return out;
}

}  // namespace onecat::serve
