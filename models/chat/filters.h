// jinja2's filters (`value | name(args)`), with transformers' |tojson.
#pragma once
#include <string>

#include "models/chat/value.h"

namespace onecat::chat {

bool filter_exists(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);

}  // namespace onecat::chat
