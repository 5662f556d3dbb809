#include "models/tokenizer/pattern.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace onecat::tokenizer {

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(const std::string& pattern) {
  Pattern p;
  p.regex_ = std::make_shared<const Regex>(pattern);
  return p;
}

Pattern Pattern::from_json(const nlohmann::json& j) {
  if (j.is_object() && j.contains("String")) return literal(j.at("String").get<std::string>());
  if (j.is_object() && j.contains("Regex")) return regex(j.at("Regex").get<std::string>());
  throw Error("A tokenizer pattern must be {\"String\": …} or {\"Regex\": …}, not " + j.dump() + ".");
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (regex_) {
    regex_->for_each_match(text, [&](size_t b, size_t e) { matches.emplace_back(b, e); });
  } else if (!literal_.empty()) {
    for (size_t pos = text.find(literal_); pos != std::string_view::npos;
         pos = text.find(literal_, pos + literal_.size()))
      matches.emplace_back(pos, pos + literal_.size());
  }
  return matches;
}

std::string Pattern::replace_all(std::string_view text, std::string_view with) const {
  std::string out;
  size_t last = 0;
  for (auto [b, e] : find_all(text)) {
    out.append(text.substr(last, b - last));
    out.append(with);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace onecat::tokenizer
