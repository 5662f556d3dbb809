#include "models/tokenizer/added_tokens.h"

#include "models/tokenizer/regex.h"
#include "models/tokenizer/unicode.h"

namespace onecat::tokenizer {

namespace {

// Whether the character at the start of `text` is a word character for single_word
// tokens: Rust's char::is_alphanumeric, or '_'.
bool starts_with_word_char(std::string_view text) {
  static const Regex word("[\\p{Alphabetic}\\p{N}_]");
  size_t end = 0;
  next_code_point(text, end);
  bool found = false;
  word.for_each_match(text.substr(0, end), [&](size_t, size_t) { found = true; });
  return found;
}

// The start of the last character of `text` (non-empty, valid UTF-8).
size_t last_char_start(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& p = patterns[i];
    if (p.empty()) continue;
    int32_t node = 0;
    for (unsigned char c : p) {
      int32_t next = child(node, c);
      if (next < 0) {
        next = int32_t(nodes_.size());
        nodes_[node].children.emplace_back(c, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    if (nodes_[node].token_index < 0) nodes_[node].token_index = int32_t(i);
    first_byte_[static_cast<unsigned char>(p[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (auto [c, n] : nodes_[node].children)
    if (c == byte) return n;
  return -1;
}

std::vector<TextSpan> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSpan> spans;
  size_t plain_from = 0;  // where the current plain stretch starts
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[node].token_index >= 0) {
        best = nodes_[node].token_index;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[best];
    size_t begin = pos, end = best_end;
    pos = best_end;  // a rejected match is still consumed, as in the reference
    if (token.single_word) {
      bool word_before = begin > 0 && starts_with_word_char(text.substr(last_char_start(text.substr(0, begin))));
      bool word_after = end < text.size() && starts_with_word_char(text.substr(end));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t b = begin;
      while (b > plain_from) {
        size_t start = last_char_start(text.substr(0, b));
        size_t p = start;
        if (!is_white_space(next_code_point(text, p))) break;
        b = start;
      }
      begin = b;
    }
    if (token.rstrip) {
      while (end < text.size()) {
        size_t p = end;
        if (!is_white_space(next_code_point(text, p))) break;
        end = p;
      }
      pos = end;
    }
    if (begin > plain_from) spans.push_back({plain_from, begin, -1});
    spans.push_back({begin, end, token.id});
    plain_from = end;
  }
  if (plain_from < text.size()) spans.push_back({plain_from, text.size(), -1});
  return spans;
}

}  // namespace onecat::tokenizer
