// Runs a parsed template over its variables, with jinja2's scoping: a for loop's body and a
// macro call get their own scope; if-blocks do not; namespaces carry values out of loops.
#pragma once
#include <ctime>
#include <optional>
#include <string>

#include "models/chat/ast.h"
#include "models/chat/value.h"

namespace onecat::chat {

struct RenderOptions {
  // What strftime_now() formats, in UTC; unset: the local time now (as transformers does).
  std::optional<std::time_t> now;
};

// `variables` is a dict Value (messages, tools, add_generation_prompt, bos_token, ...).
std::string run(const Body& program, const Value& variables, const RenderOptions& options);

}  // namespace onecat::chat
