// UTF-8 helpers and the byte-level alphabet shared by the tokenizer's stages.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace onecat::tokenizer {

// The code point starting at s[pos] (s must be valid UTF-8); pos moves past it.
char32_t next_code_point(std::string_view s, size_t& pos);

// Bytes in a UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
inline size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

void append_utf8(std::string& out, char32_t cp);
bool is_valid_utf8(std::string_view s);

// Bytes → text, each maximal ill-formed subsequence replaced by U+FFFD: the rule that
// Hugging Face tokenizers (Rust's String::from_utf8_lossy) applies when decoding, so a
// decoded string matches theirs byte for byte.
std::string utf8_lossy(std::string_view bytes);

// Number of bytes at the end of `s` that form an incomplete (but so far valid) UTF-8
// sequence: 0 when s ends on a character boundary.
size_t incomplete_utf8_tail(std::string_view s);

// GPT-2's byte-level alphabet: every byte as a printable code point (printable Latin-1
// bytes stand for themselves, the others are shifted to U+0100 and up), so any byte string
// becomes a string of vocabulary characters.
const std::array<char32_t, 256>& byte_to_code_point();
// The byte that `cp` stands for in that alphabet, or -1.
int code_point_to_byte(char32_t cp);
// Raw bytes → their byte-level spelling (what byte-level vocabularies store).
std::string byte_level_encode(std::string_view bytes);

}  // namespace onecat::tokenizer

namespace onecat::tokenizer {

// Unicode White_Space (what Rust's char::is_whitespace and Oniguruma's \s accept).
inline bool is_white_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace onecat::tokenizer
