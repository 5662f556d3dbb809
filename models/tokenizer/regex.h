// A Hugging Face tokenizer regex (Oniguruma syntax) compiled with PCRE2 (UTF, Unicode
// properties, JIT). The pattern is first rewritten where the two engines differ, so that
// matches are the ones `tokenizers` finds.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace onecat::tokenizer {

class Regex {
 public:
  explicit Regex(const std::string& oniguruma_pattern);  // Error naming the pattern if invalid
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for each non-overlapping match in `text`, left to right
  // (an empty match advances by one character). `text` must be valid UTF-8.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

// Oniguruma → PCRE2: `\s`/`\S` become Unicode White_Space (PCRE2's \s also takes U+180E),
// `\h`/`\H` are hexadecimal digits in Oniguruma, and `\p{…}` categories gain the code
// points that PCRE2's older Unicode data lacks (unicode_tables.h). Exposed for tests.
std::string pcre2_pattern_from_oniguruma(const std::string& pattern);

}  // namespace onecat::tokenizer
