// Unicode data that tokenizers has and PCRE2 lacks (generated: tools/unicode_tables.py).
#pragma once
#include <cstddef>

namespace onecat::tokenizer {

struct CategoryAddition {
  const char* category;  // a general category as \p{…} names it: "L", "Nd", …
  const char* ranges;    // regex class fragment of the code points PCRE2 leaves out
};
extern const CategoryAddition kCategoryAdditions[];
extern const size_t kCategoryAdditionCount;

// Exactly what tokenizers' Digits (Rust char::is_numeric) and Punctuation pre-tokenizers
// take, as regex class fragments.
extern const char* const kDigitsClass;
extern const char* const kPunctuationClass;

// Code points that tokenizers' NFC treats as inert starters (its Unicode data predates
// them) while utf8proc reorders or composes them; sorted.
extern const char32_t kNfcInertCodePoints[];
extern const size_t kNfcInertCodePointCount;

}  // namespace onecat::tokenizer
