#include "engine/text_stream.h"

#include <algorithm>

#include "base/error.h"

namespace onecat::engine {

TextStream::TextStream(tokenizer::Tokenizer tokenizer, std::vector<std::string> stop_strings, bool skip_special_tokens)
    : tokenizer_(tokenizer), decoder_(std::move(tokenizer), skip_special_tokens), stops_(std::move(stop_strings)) {
  for (const std::string& s : stops_) {
    if (s.empty()) throw InputError("a stop string must not be empty.");
  }
}

std::string TextStream::step(int32_t id) {
  if (stopped_ || !tokenizer_.id_to_token(id)) return {};
  held_ += decoder_.step(id);
  return release();
}

std::string TextStream::finish() {
  if (stopped_) return {};
  held_ += decoder_.finish();
  std::string out = release();
  if (!stopped_) out += held_;
  held_.clear();
  return out;
}

std::string TextStream::release() {
  // Everything returned so far was checked to start no stop string, so a match starts in held_.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    std::string out = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest tail of held_ that some stop string begins with. held_ is whole
  // UTF-8 characters, so the cut is at a character boundary.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace onecat::engine
