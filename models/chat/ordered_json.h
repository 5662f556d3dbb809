// JSON whose objects keep their keys in the order written (nlohmann::ordered_json), built in time
// linear in the text. ordered_json::parse looks each key up among its object's earlier keys, so an
// object of n keys costs n²/2 string comparisons (40,000 keys: 16 s); a request's schema or tools
// must not be able to tie up a server thread that way. Chat templates and JSON schemas see keys in
// the order a client sent them, as transformers and vLLM do with Python dicts.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace onecat::chat {

// `text` as ordered_json; a key written twice keeps its first place and its last value, as
// ordered_json::parse does. Throws nlohmann's parse_error (and out_of_range for a number past a
// double, such as 1e400) as parse does. Any depth: limit it with json_nests_deeper first.
nlohmann::ordered_json parse_ordered_json(std::string_view text);

// Whether arrays and objects nest deeper than max_depth in `text`, read as JSON as far as it goes
// (strings skipped). Checked before a parse (this one or nlohmann's plain one): nlohmann's
// callback form, the other way to limit depth, walks a whole array or object each time one of
// its objects ends, n²/2 steps for n objects in one array or object.
bool json_nests_deeper(std::string_view text, int max_depth);

// The same text as parse_ordered_json would build from `j.dump()`, without the text.
nlohmann::ordered_json to_ordered_json(const nlohmann::json& j);

}  // namespace onecat::chat
