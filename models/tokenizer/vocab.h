// Token text ↔ id, with look-ups by string_view (no temporary strings on the hot path).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace onecat::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  Vocab() = default;
  // Error if an id is negative or two tokens share one.
  void add(std::string token, int32_t id);

  std::optional<int32_t> find(std::string_view token) const {
    auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  // nullptr for an id without a token.
  const std::string* token(int32_t id) const {
    return id >= 0 && size_t(id) < tokens_.size() && present_[id] ? &tokens_[id] : nullptr;
  }
  size_t id_limit() const { return tokens_.size(); }  // one past the largest id
  size_t size() const { return ids_.size(); }

 private:
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
};

}  // namespace onecat::tokenizer
