#include "models/chat/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "models/chat/error.h"
#include "models/chat/utf8.h"

namespace onecat::chat {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.rstrip() and regex \s, which count Unicode spaces (U+3000, U+00A0, ...) too.
size_t end_without_trailing_space(const std::string& text) {
  size_t keep = 0;
  for (size_t i = 0; i < text.size();)
    if (!utf8::is_space(utf8::next(text, i))) keep = i;
  return keep;
}

size_t skip_space(const std::string& s, size_t at) {
  while (at < s.size()) {
    size_t next = at;
    if (!utf8::is_space(utf8::next(s, next))) break;
    at = next;
  }
  return at;
}

// jinja2 reads a template with universal newlines and, by default, without its final newline.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A string literal's body as Python's unicode-escape codec decodes it.
std::string decode_escapes(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    char c = body[++i];
    auto hex = [&](size_t digits) {
      std::string h = body.substr(i + 1, digits);
      if (h.size() != digits || h.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        throw TemplateError(line, "a string literal has a malformed \\x, \\u or \\U escape");
      i += digits;
      utf8::append(out, char32_t(std::strtoul(h.c_str(), nullptr, 16)));
    };
    switch (c) {
      case '\n':
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      case 'N':
        throw TemplateError(line, "named escapes (\\N{...}) in string literals are not supported");
      default:
        if (c >= '0' && c <= '7') {
          unsigned v = unsigned(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            v = v * 8 + unsigned(body[++i] - '0');
          utf8::append(out, char32_t(v));
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t open = find_tag_start(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        emit_data(text, line_);
        break;
      }
      char kind = src_[open + 1];
      char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
      int text_line = line_;
      if (sign == '-') {
        text.resize(end_without_trailing_space(text));
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: the tag is the first thing on its line.
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        bool only_blanks = line_start < text.size();
        only_blanks = only_blanks && skip_space(text, line_start) == text.size();
        if (only_blanks && (line_start > 0 || line_starting_)) text.resize(line_start);
      }
      emit_data(text, text_line);
      advance_to(open);
      pos_ = open + 2 + (sign ? 1 : 0);
      if (kind == '#')
        skip_comment();
      else
        lex_tag(kind == '{' ? TokenType::print_begin : TokenType::block_begin);
    }
    tokens_.push_back({TokenType::end, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void emit_data(const std::string& text, int line) {
    if (!text.empty()) tokens_.push_back({TokenType::data, text, line});
  }

  // Moves pos_ to `to`, counting lines.
  void advance_to(size_t to) {
    for (size_t i = pos_; i < to; ++i)
      if (src_[i] == '\n') ++line_;
    line_starting_ = to > 0 && to > pos_ && src_[to - 1] == '\n';
    pos_ = to;
  }

  // After a tag's closing delimiter: `-` eats all whitespace, `+` nothing, else trim_blocks.
  void after_tag_end(size_t close_end, char sign, bool is_block) {
    size_t to = close_end;
    if (sign == '-') {
      to = skip_space(src_, to);
    } else if (sign != '+' && is_block && to < src_.size() && src_[to] == '\n') {
      ++to;
    }
    size_t from = pos_;
    advance_to(to);
    line_starting_ = to > from && src_[to - 1] == '\n';
  }

  void skip_comment() {
    int start_line = line_;
    if (pos_ == src_.size()) return;  // jinja2 quietly drops a "{#" that ends the template
    size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) throw TemplateError(start_line, "a comment ({# ... #}) is never closed");
    char sign = close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    after_tag_end(close + 2, sign, true);
  }

  void lex_tag(TokenType begin) {
    bool block = begin == TokenType::block_begin;
    const char* close = block ? "%}" : "}}";
    tokens_.push_back({begin, "", line_});
    int depth = 0;
    if (block) check_not_raw();
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size())
        throw TemplateError(line_, std::string("a tag is never closed (missing '") + close + "')");
      if (depth == 0) {
        char sign = src_[pos_] == '-' || src_[pos_] == '+' ? src_[pos_] : 0;
        size_t at = pos_ + (sign ? 1 : 0);
        if (src_.compare(at, 2, close) == 0) {
          tokens_.push_back({block ? TokenType::block_end : TokenType::print_end, "", line_});
          after_tag_end(at + 2, sign, block);
          return;
        }
      }
      lex_expression_token(depth);
    }
  }

  void check_not_raw() {
    size_t p = pos_;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") == 0 && (p + 3 >= src_.size() || !std::isalnum((unsigned char)src_[p + 3])))
      throw TemplateError(line_, "{% raw %} blocks are not supported");
  }

  void lex_expression_token(int& depth) {
    int line = line_;
    char c = src_[pos_];
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t start = pos_;
      while (pos_ < src_.size() && (std::isalnum((unsigned char)src_[pos_]) || src_[pos_] == '_')) ++pos_;
      tokens_.push_back({TokenType::name, src_.substr(start, pos_ - start), line});
      return;
    }
    if (std::isdigit((unsigned char)c)) return lex_number(line);
    if (c == '\'' || c == '"') return lex_string(line);
    static const char* const two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two)
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenType::op, op, line});
        pos_ += 2;
        return;
      }
    if (std::string("+-*/%~()[]{},.:|=<>").find(c) == std::string::npos) {
      size_t end = pos_;
      utf8::next(src_, end);  // name the whole character, not its first byte
      throw TemplateError(line, "unexpected character '" + src_.substr(pos_, end - pos_) + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back({TokenType::op, std::string(1, c), line});
    ++pos_;
  }

  void lex_number(int line) {
    auto digits = [&] {
      size_t start = pos_;
      while (pos_ < src_.size() && (std::isdigit((unsigned char)src_[pos_]) || src_[pos_] == '_')) ++pos_;
      std::string d = src_.substr(start, pos_ - start);
      d.erase(std::remove(d.begin(), d.end(), '_'), d.end());
      return d;
    };
    std::string text = digits();
    bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::op && tokens_.back().text == ".";
    bool is_float = false;
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit((unsigned char)src_[pos_ + 1])) {
      ++pos_;
      text += "." + digits();
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t save = pos_++;
      std::string exp = "e";
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) exp += src_[pos_++];
      if (pos_ < src_.size() && std::isdigit((unsigned char)src_[pos_])) {
        text += exp + digits();
        is_float = true;
      } else {
        pos_ = save;
      }
    }
    Token t{is_float ? TokenType::number : TokenType::integer, text, line};
    if (is_float) {
      t.number = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.integer = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) throw TemplateError(line, "the integer literal " + text + " is too large");
    }
    tokens_.push_back(t);
  }

  void lex_string(int line) {
    char quote = src_[pos_++];
    size_t start = pos_;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      if (src_[pos_] == '\\') ++pos_;
      if (pos_ < src_.size() && src_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ >= src_.size()) throw TemplateError(line, "a string literal is never closed");
    tokens_.push_back({TokenType::string, decode_escapes(src_.substr(start, pos_ - start), line), line});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

}  // namespace onecat::chat
