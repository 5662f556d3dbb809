// Added tokens (tokenizer.json's "added_tokens"): strings matched in the text before the
// model sees it, leftmost and then longest first, each becoming its own id.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace onecat::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // skipped by decode(…, skip_special_tokens)
  bool lstrip = false;       // swallows the whitespace before it
  bool rstrip = false;       // swallows the whitespace after it
  bool single_word = false;  // matches only between word boundaries
  bool normalized = false;   // matched in the normalized text, not in the raw input
};

// A stretch of text: either plain text for the model, or one matched added token.
struct TextSpan {
  size_t begin, end;
  int32_t token;  // -1 for plain text
};

// Finds one set of added tokens (the raw or the normalized ones) in a text.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is what is searched for token `tokens[i]` (its content, normalized or not).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }
  // Splits `text` into plain stretches and matched tokens covering it (no empty spans).
  std::vector<TextSpan> split(std::string_view text) const;

 private:
  // A byte trie: the longest pattern at a position is found in one walk.
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t token_index = -1;
  };
  int32_t child(int32_t node, unsigned char byte) const;
  std::vector<Node> nodes_{1};
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace onecat::tokenizer
