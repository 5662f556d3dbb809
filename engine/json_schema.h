// Grammars for structured outputs (docs/serve.md, "Structured outputs"): any JSON object
// (OpenAI's response_format json_object), the instances of a JSON schema (json_schema), and one
// of a list of strings (vLLM's guided_choice). Output is JSON without whitespace at its ends;
// between tokens it allows none, one space, or a newline and up to kMaxIndent spaces or tabs, so
// a model can pretty-print but cannot spin on whitespace (nor on a number's digits).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar.h"

namespace onecat::engine {

inline constexpr int kMaxIndent = 32;
// Digits a number may have (so a model cannot run away in one): before the point (no leading
// zeros; 18 always fit a 64-bit integer), after it, and in the exponent.
inline constexpr int kMaxIntegerDigits = 18, kMaxFractionDigits = 20, kMaxExponentDigits = 3;
// minLength / maxLength / minItems / maxItems above this are refused (each unit is a rule).
inline constexpr int64_t kMaxCountedRepeat = 4096;
// Subschemas nest (and $refs lead to one another) at most this deep (an InputError beyond).
inline constexpr int kMaxSchemaDepth = 128;

Grammar json_object_grammar();

// The schema's keywords this understands are in docs/serve.md. Properties are written in the
// schema's order; without additionalProperties, an object with properties has no others (as
// OpenAI's strict mode and xgrammar do). A keyword it would have to ignore to match (pattern,
// format, minimum, …) is an InputError naming it and where it is, so no output claims a schema
// it did not follow.
// `suffix`: text that must follow the value (e.g. the "}" closing a tool call around it).
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, std::string_view suffix = {});

// One of these strings, as they are (no quotes). InputError when the list is empty.
Grammar choice_grammar(const std::vector<std::string>& choices);

}  // namespace onecat::engine
