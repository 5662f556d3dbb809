#include "models/tokenizer/decode_stream.h"

#include "base/error.h"

namespace onecat::tokenizer {

namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

DecodeStream::DecodeStream(Tokenizer tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special_tokens) {}

std::string DecodeStream::step(int32_t id) {
  pending_.push_back(id);
  if (tokenizer_.is_fallback_byte(id)) return "";  // the run of bytes may continue
  std::vector<int32_t> window = context_;
  window.insert(window.end(), pending_.begin(), pending_.end());
  std::string text = tokenizer_.decode(window, skip_special_);
  // A trailing U+FFFD may be the start of a character that the next ids complete.
  if (text.size() <= context_text_.size() || ends_with_replacement(text)) return "";
  if (text.compare(0, context_text_.size(), context_text_) != 0)
    throw Error(
        "Streaming decode found a decoder whose output changes earlier text; decode the whole sequence instead.");
  std::string fresh = text.substr(context_text_.size());
  context_ = std::move(pending_);
  pending_.clear();
  context_text_ = tokenizer_.decode(context_, skip_special_);
  return fresh;
}

std::string DecodeStream::finish() {
  if (pending_.empty()) return "";
  std::vector<int32_t> window = context_;
  window.insert(window.end(), pending_.begin(), pending_.end());
  std::string text = tokenizer_.decode(window, skip_special_);
  pending_.clear();
  std::string fresh = text.size() > context_text_.size() ? text.substr(context_text_.size()) : "";
  context_.clear();
  context_text_.clear();
  return fresh;
}

}  // namespace onecat::tokenizer
