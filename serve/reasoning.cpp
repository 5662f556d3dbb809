#include "serve/reasoning.h"

#include <algorithm>
#include <string_view>

namespace onecat::serve {
namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// Length of the longest tail of `text` that `tag` starts with (a proper prefix of it).
size_t partial_tail(const std::string& text, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, text.size()); n > 0; --n) {
    if (text.compare(text.size() - n, n, tag.substr(0, n)) == 0) return n;
  }
  return 0;
}

}  // namespace

bool opens_reasoning(std::string_view prompt) {
  const size_t end = prompt.find_last_not_of(" \t\r\n");
  return end != std::string_view::npos && prompt.substr(0, end + 1).ends_with(kOpen);
}

ReasoningSplitter::Delta ReasoningSplitter::step(const std::string& piece) {
  held_ += piece;
  Delta out;
  if (phase_ == Phase::kStart) {
    const size_t begin = held_.find_first_not_of(" \t\r\n");
    if (begin == std::string::npos) return out;  // only whitespace so far
    const std::string_view rest = std::string_view(held_).substr(begin);
    if (rest.size() < kOpen.size() && kOpen.starts_with(rest)) return out;  // may still become <think>
    if (rest.starts_with(kOpen)) {
      phase_ = Phase::kReasoning;
      held_.erase(0, begin + kOpen.size());
    } else {
      phase_ = Phase::kContent;
    }
  }
  if (phase_ == Phase::kReasoning) {
    const size_t end = held_.find(kClose);
    if (end == std::string::npos) {
      const size_t keep = partial_tail(held_, kClose);
      out.reasoning = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.reasoning = held_.substr(0, end);
    held_.erase(0, end + kClose.size());
    phase_ = Phase::kContent;
  }
  out.content = std::move(held_);
  held_.clear();
  return out;
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta out;
  if (phase_ == Phase::kReasoning) {
    out.reasoning = std::move(held_);
  } else {
    out.content = std::move(held_);
  }
  held_.clear();
  return out;
}

ReasoningSplitter::Delta ReasoningSplitter::split(const std::string& text, bool opened) {
  ReasoningSplitter s(opened);
  Delta a = s.step(text);
  Delta b = s.finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

}  // namespace onecat::serve
