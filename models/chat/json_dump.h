// Python's json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...),
// which transformers installs as the templates' |tojson filter.
#pragma once
#include <optional>
#include <string>

#include "models/chat/value.h"

namespace onecat::chat {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // None: one line; an int n becomes n spaces
  std::optional<std::string> item_separator, key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;  // non-ASCII as \\uXXXX escapes
};

std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace onecat::chat
