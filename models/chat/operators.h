// Python's operators on template values: + - * / // % ** ~, comparisons, in / not in.
#pragma once
#include <string>

#include "models/chat/value.h"

namespace onecat::chat {

Value unary_arithmetic(const std::string& op, const Value& v);  // "-" or "+"
Value binary_arithmetic(const std::string& op, const Value& a, const Value& b);
bool compare(const std::string& op, const Value& a, const Value& b);  // == != < <= > >= in "not in"

}  // namespace onecat::chat
