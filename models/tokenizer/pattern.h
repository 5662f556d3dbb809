// A tokenizer.json "pattern": {"String": "…"} (literal) or {"Regex": "…"}.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/tokenizer/regex.h"

namespace onecat::tokenizer {

class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(const std::string& pattern);
  static Pattern from_json(const nlohmann::json& j);

  // Non-overlapping matches, left to right, as [begin, end) byte ranges.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  std::string replace_all(std::string_view text, std::string_view with) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

}  // namespace onecat::tokenizer
