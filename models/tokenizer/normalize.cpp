#include "models/tokenizer/normalize.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "models/tokenizer/pattern.h"
#include "models/tokenizer/unicode.h"
#include "models/tokenizer/unicode_tables.h"

namespace onecat::tokenizer {

namespace {

class Prepend : public NormalizerStep {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace : public NormalizerStep {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// Unicode normalization forms through utf8proc.
class UnicodeForm : public NormalizerStep {
 public:
  explicit UnicodeForm(utf8proc_option_t options) : options_(options) {}
  void apply(std::string& text) const override {
    // Code points below U+0300 never compose with a neighbour, so such text is its own
    // NFC form (most ASCII and Latin-1 text takes this path).
    if (options_ == kNfc) {
      bool below = true;
      for (unsigned char c : text) below &= c < 0xCC;
      if (below) return;
    }
    if (options_ != kNfc) {
      text = map(text);
      return;
    }
    // tokenizers' NFC sees some newer marks as inert starters: normalize the stretches
    // between them on their own, so they neither move nor compose.
    std::string out;
    size_t stretch = 0;
    for (size_t pos = 0; pos < text.size();) {
      size_t begin = pos;
      char32_t cp = next_code_point(text, pos);
      if (cp < 0x300 || !std::binary_search(kNfcInertCodePoints, kNfcInertCodePoints + kNfcInertCodePointCount, cp))
        continue;
      out += map(std::string_view(text).substr(stretch, begin - stretch));
      out.append(text, begin, pos - begin);
      stretch = pos;
    }
    out += stretch == 0 ? map(text) : map(std::string_view(text).substr(stretch));
    text = std::move(out);
  }

 private:
  std::string map(std::string_view text) const {
    if (text.empty()) return {};
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                      utf8proc_ssize_t(text.size()), &out, options_);
    if (n < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n) + ".");
    std::string result(reinterpret_cast<char*>(out), size_t(n));
    std::free(out);
    return result;
  }

 public:
  static constexpr utf8proc_option_t kNfc = utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE);

 private:
  utf8proc_option_t options_;
};

// Strips Unicode White_Space at either end.
class Strip : public NormalizerStep {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text) const override {
    std::string_view v = text;
    size_t b = 0, e = v.size();
    if (left_ && !v.empty()) {
      size_t pos = 0;
      while (pos < v.size()) {
        size_t next = pos;
        if (!is_white_space(next_code_point(v, next))) break;
        pos = next;
      }
      b = pos;
    }
    if (right_) {
      size_t pos = b, last_non_space = b;
      while (pos < v.size()) {
        size_t next = pos;
        if (!is_white_space(next_code_point(v, next))) last_non_space = next;
        pos = next;
      }
      e = last_non_space;
    }
    text = std::string(v.substr(b, e - b));
  }

 private:
  bool left_, right_;
};

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  if (!j.is_null()) n.add(j);
  return n;
}

void Normalizer::add(const nlohmann::json& j) {
  std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : j.at("normalizers")) add(step);
  } else if (type == "Prepend") {
    steps_.push_back(std::make_shared<Prepend>(j.at("prepend").get<std::string>()));
  } else if (type == "Replace") {
    steps_.push_back(
        std::make_shared<Replace>(Pattern::from_json(j.at("pattern")), j.at("content").get<std::string>()));
  } else if (type == "NFC") {
    steps_.push_back(std::make_shared<UnicodeForm>(UnicodeForm::kNfc));
  } else if (type == "NFKC") {
    steps_.push_back(
        std::make_shared<UnicodeForm>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT)));
  } else if (type == "NFD") {
    steps_.push_back(std::make_shared<UnicodeForm>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE)));
  } else if (type == "NFKD") {
    steps_.push_back(
        std::make_shared<UnicodeForm>(utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT)));
  } else if (type == "Strip") {
    steps_.push_back(std::make_shared<Strip>(j.value("strip_left", true), j.value("strip_right", true)));
  } else {
    throw Error("The tokenizer's normalizer '" + type + "' is not supported by onecat.");
  }
}

std::string Normalizer::apply(std::string text) const {
  for (const auto& step : steps_) step->apply(text);
  return text;
}

}  // namespace onecat::tokenizer
