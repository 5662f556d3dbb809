// Regular expressions as grammar rules (docs/serve.md, "Structured outputs"): vLLM's
// guided_regex, and JSON schema's pattern and format inside a JSON string. The syntax is
// ECMAScript's without what a regular language cannot say: literals, `.`, classes ([a-z],
// [^…], \d \w \s and their negations), groups ((…), (?:…), (?<name>…)), alternation,
// quantifiers (* + ? {n} {n,} {n,m}, lazy forms alike), ^ at the start and $ at the end.
// Backreferences, lookaround and word boundaries are InputErrors. Characters are Unicode code
// points, written as UTF-8 (`.` any but a line break).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/grammar.h"

namespace onecat::engine {

// How a character is written in the text the grammar matches.
enum class RegexText {
  kRaw,         // as its UTF-8 bytes
  kJsonString,  // inside a JSON string: '"' and '\' escaped, control characters as \n, \t, … or \u00xx
};

// Repetition bounds above this are refused (each counted repetition is a rule).
inline constexpr int64_t kMaxRegexRepeat = 1000;

// Groups, alternations and quantifiers nest at most this deep (an InputError beyond).
inline constexpr int kMaxRegexNesting = 100;

// A rule of `g` matching the texts the whole pattern matches (anchored at both ends whether or
// not it says ^ and $), or with `search` (JSON schema's pattern) the texts that contain a match
// (anchored only where it says ^ or $). InputError naming what is not supported.
int add_regex(Grammar& g, std::string_view pattern, RegexText text, bool search = false);

// guided_regex: a grammar of the pattern's whole matches, raw text.
Grammar regex_grammar(std::string_view pattern);

// A regex for the integers in [lo, hi] written in decimal without leading zeros (−0 never), for
// JSON schema's minimum / maximum on integers.
std::string integer_range_regex(int64_t lo, int64_t hi);

}  // namespace onecat::engine
