// jinja2's tests: `value is name(args)`.
#pragma once
#include <string>

#include "models/chat/value.h"

namespace onecat::chat {

bool test_exists(const std::string& name);
// args.positional holds the arguments after the value; throws TemplateError on bad arguments.
bool apply_test(const std::string& name, const Value& value, CallArgs& args);

}  // namespace onecat::chat
