// Template text → tokens, with jinja2's whitespace rules as transformers configures them:
// newlines normalised to \n, one trailing newline dropped, `-`/`+` markers on tags,
// trim_blocks (the newline after a block or comment tag goes) and lstrip_blocks (spaces
// and tabs before a block or comment tag on its own line go).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace onecat::chat {

enum class TokenType {
  data,         // template text, printed as is
  print_begin,  // {{
  print_end,    // }}
  block_begin,  // {%
  block_end,    // %}
  name,
  string,   // text holds the decoded value
  integer,  // integer holds the value
  number,   // a float literal; number holds the value
  op,       // text holds the operator: + - * / // % ** ~ ( ) [ ] { } , . : | = == != < <= > >=
  end,
};

struct Token {
  TokenType type;
  std::string text;
  int line = 0;
  int64_t integer = 0;
  double number = 0;
};

std::vector<Token> lex(const std::string& source);

}  // namespace onecat::chat
