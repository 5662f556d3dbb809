#include "models/tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "models/tokenizer/pattern.h"
#include "models/tokenizer/unicode.h"

namespace onecat::tokenizer {

namespace {

constexpr const char* kReplacementChar = "\xEF\xBF\xBD";

// Byte-level alphabet → bytes; a token with a character outside the alphabet keeps its
// own bytes. All of it becomes one string, invalid UTF-8 replaced.
class ByteLevel : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens, bool lossy) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      size_t mark = bytes.size();
      bool all = true;
      for (size_t pos = 0; pos < t.size();) {
        int b = code_point_to_byte(next_code_point(t, pos));
        if (b < 0) {
          all = false;
          break;
        }
        bytes += char(b);
      }
      if (!all) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, lossy ? utf8_lossy(bytes) : bytes);
  }
};

// <0xXX> tokens → their bytes, each run of them becoming one string when it is valid
// UTF-8 and one U+FFFD per byte when it is not.
class ByteFallback : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens, bool lossy) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_length = 0;
    auto flush = [&] {
      if (run_length == 0) return;
      if (!lossy || is_valid_utf8(run)) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run_length; ++i) out.emplace_back(kReplacementChar);
      }
      run.clear();
      run_length = 0;
    };
    for (auto& t : tokens) {
      int byte = parse_byte_token(t);
      if (byte >= 0) {
        run += char(byte);
        ++run_length;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // "<0xAB>" → 0xAB (Rust's u8::from_str_radix, which also takes "+B"), else -1.
  static int parse_byte_token(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    if (t[3] == '+') return hex(t[4]);
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class Fuse : public DecoderStep {
 public:
  void apply(std::vector<std::string>& tokens, bool /*lossy*/) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character per token.
class Strip : public DecoderStep {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens, bool /*lossy*/) const override {
    for (auto& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t i = 0; i < start_ && t.compare(begin, content_.size(), content_) == 0 && begin < end; ++i)
        begin += content_.size();
      for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i)
        end -= content_.size();
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Replace : public DecoderStep {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens, bool /*lossy*/) const override {
    for (auto& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// The replacement character back to spaces; in the first token (unless the prefix is
// never prepended) every replacement character is dropped instead.
class Metaspace : public DecoderStep {
 public:
  Metaspace(std::string replacement, bool drop_in_first)
      : replacement_(std::move(replacement)), drop_in_first_(drop_in_first) {}
  void apply(std::vector<std::string>& tokens, bool /*lossy*/) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = Pattern::literal(replacement_).replace_all(tokens[i], i == 0 && drop_in_first_ ? "" : " ");
  }

 private:
  std::string replacement_;
  bool drop_in_first_;
};

}  // namespace

Decoder Decoder::from_json(const nlohmann::json& j) {
  Decoder d;
  if (!j.is_null()) {
    d.add(j);
    d.present_ = true;
  }
  return d;
}

void Decoder::add(const nlohmann::json& j) {
  std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : j.at("decoders")) add(step);
  } else if (type == "ByteLevel") {
    steps_.push_back(std::make_shared<ByteLevel>());
  } else if (type == "ByteFallback") {
    steps_.push_back(std::make_shared<ByteFallback>());
    byte_fallback_ = true;
  } else if (type == "Fuse") {
    steps_.push_back(std::make_shared<Fuse>());
  } else if (type == "Strip") {
    steps_.push_back(std::make_shared<Strip>(j.at("content").get<std::string>(), j.at("start").get<size_t>(),
                                             j.at("stop").get<size_t>()));
  } else if (type == "Replace") {
    steps_.push_back(
        std::make_shared<Replace>(Pattern::from_json(j.at("pattern")), j.at("content").get<std::string>()));
  } else if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
    steps_.push_back(
        std::make_shared<Metaspace>(j.value("replacement", std::string("\xE2\x96\x81")), scheme != "never"));
  } else {
    throw Error("The tokenizer's decoder '" + type + "' is not supported by onecat.");
  }
}

std::string Decoder::decode(std::vector<std::string> tokens, bool lossy) const {
  std::string text;
  if (!present_) {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  for (const auto& step : steps_) step->apply(tokens, lossy);
  for (const auto& t : tokens) text += t;
  return text;
}

}  // namespace onecat::tokenizer
