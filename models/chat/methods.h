// Attribute and item access as jinja2's sandbox does it, and the Python methods templates
// call on strings, dicts and lists (str.strip, dict.get, ...).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/chat/value.h"

namespace onecat::chat {

// obj.name: a method of obj if it has one by that name, else obj["name"], else undefined.
Value get_attribute(const Value& obj, const std::string& name);
// obj[key]: the item, else (for a string key) the attribute, else undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on a string, list or tuple (unset bounds are undefined values).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python's whitespace-aware str.strip/split helpers, shared with the filters.
std::string strip(const std::string& s, const Value& chars, bool left, bool right);
std::vector<std::string> splitlines(const std::string& s);

}  // namespace onecat::chat
