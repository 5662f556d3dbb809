#define PCRE2_CODE_UNIT_WIDTH 8
#include "models/tokenizer/regex.h"

#include <pcre2.h>

#include "base/error.h"
#include "models/tokenizer/unicode.h"
#include "models/tokenizer/unicode_tables.h"

namespace onecat::tokenizer {

namespace {

// Unicode White_Space, the set Oniguruma's \s matches.
constexpr const char* kWhiteSpaceRanges =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
constexpr const char* kHexDigitRanges = "0-9A-Fa-f";

// Per-thread match state: a match-data block for one pair (all we read) and a JIT stack
// large enough for long whitespace runs under `\s+(?!\S)`.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

// Code points tokenizers has in a general category that PCRE2's older Unicode data
// lacks; nullptr for a name without additions.
const char* category_additions(const std::string& name) {
  for (size_t i = 0; i < kCategoryAdditionCount; ++i)
    if (name == kCategoryAdditions[i].category) return kCategoryAdditions[i].ranges;
  return nullptr;
}

}  // namespace

std::string pcre2_pattern_from_oniguruma(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 2 < p.size() && (p[i + 1] == 'p' || p[i + 1] == 'P') && p[i + 2] == '{') {
      size_t close = p.find('}', i + 3);
      std::string name = close == std::string::npos ? "" : p.substr(i + 3, close - i - 3);
      const char* added = category_additions(name);
      if (added) {
        bool negated = p[i + 1] == 'P';
        if (in_class && negated)
          throw Error("The tokenizer regex '" + p + "' uses \\P{" + name +
                      "} inside a character class, which onecat does not support.");
        std::string item = "\\p{" + name + "}" + added;
        out += in_class ? item : (negated ? "[^" : "[") + item + "]";
        i = close;
        continue;
      }
    }
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      const char* ranges = (e == 's' || e == 'S')   ? kWhiteSpaceRanges
                           : (e == 'h' || e == 'H') ? kHexDigitRanges
                                                    : nullptr;
      bool negated = e == 'S' || e == 'H';
      if (!ranges) {
        out += c;
        out += e;
      } else if (!in_class) {
        out += negated ? "[^" : "[";
        out += ranges;
        out += "]";
      } else if (!negated) {
        out += ranges;
      } else {
        throw Error("The tokenizer regex '" + p + "' uses \\" + std::string(1, e) +
                    " inside a character class, which onecat does not support.");
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' or '^]' right after the opening bracket is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      size_t close = p.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(p, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& oniguruma_pattern) : pattern_(oniguruma_pattern), compiled_(new Compiled) {
  std::string translated = pcre2_pattern_from_oniguruma(oniguruma_pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MULTILINE: Oniguruma's ^ and $ are line anchors.
  compiled_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw Error("The tokenizer regex '" + oniguruma_pattern + "' does not compile (" +
                reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset) + ").");
  }
  // JIT is an accelerator only: without it PCRE2 interprets the same pattern.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;

void Regex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  MatchState& state = match_state();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw Error("Matching the tokenizer regex '" + pattern_ + "' failed (" + reinterpret_cast<const char*>(message) +
                  ").");
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    size_t b = ov[0], e = ov[1];
    on_match(b, e);
    if (e > b) {
      start = e;
    } else {
      if (b >= text.size()) return;
      start = b + utf8_sequence_length(static_cast<unsigned char>(text[b]));
    }
  }
}

}  // namespace onecat::tokenizer
