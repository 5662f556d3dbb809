// Tokens → statements. Anything outside the supported subset of Jinja is an error that
// names its line (never a guess), as are unknown filters and tests, as in jinja2.
#pragma once
#include <vector>

#include "models/chat/ast.h"
#include "models/chat/lexer.h"

namespace onecat::chat {

Body parse(const std::vector<Token>& tokens);

}  // namespace onecat::chat
