#include "models/tokenizer/pretokenize.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "models/tokenizer/pattern.h"
#include "models/tokenizer/unicode.h"
#include "models/tokenizer/unicode_tables.h"

namespace onecat::tokenizer {

namespace {

// What happens to the matched delimiters of a split (tokenizers' SplitDelimiterBehavior).
enum class Behaviour { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behaviour behaviour_from_name(const std::string& name) {
  if (name == "Removed") return Behaviour::Removed;
  if (name == "Isolated") return Behaviour::Isolated;
  if (name == "MergedWithPrevious") return Behaviour::MergedWithPrevious;
  if (name == "MergedWithNext") return Behaviour::MergedWithNext;
  if (name == "Contiguous") return Behaviour::Contiguous;
  throw Error("The tokenizer's split behaviour '" + name + "' is not supported by onecat.");
}

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Cuts `in` at the matches, segments covering the whole text, then groups them the way
// `behaviour` says; empty pieces are dropped.
void split_at_matches(Piece&& in, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
                      Behaviour behaviour, std::vector<Piece>& out) {
  std::vector<Segment> segments;
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last) segments.push_back({last, b, invert});
    segments.push_back({b, e, !invert});
    last = e;
  }
  if (last < in.text.size()) segments.push_back({last, in.text.size(), invert});

  std::vector<Segment> grouped;  // is_match now means "drop it"
  bool previous_match = false;
  switch (behaviour) {
    case Behaviour::Isolated:
      for (auto s : segments) grouped.push_back({s.begin, s.end, false});
      break;
    case Behaviour::Removed:
      grouped = segments;
      break;
    case Behaviour::Contiguous:
      for (auto s : segments) {
        if (s.is_match == previous_match && !grouped.empty()) {
          grouped.back().end = s.end;
        } else {
          grouped.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behaviour::MergedWithPrevious:
      for (auto s : segments) {
        if (s.is_match && !previous_match && !grouped.empty()) {
          grouped.back().end = s.end;
        } else {
          grouped.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case Behaviour::MergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !grouped.empty()) {
          grouped.back().begin = it->begin;
        } else {
          grouped.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(grouped.begin(), grouped.end());
      break;
  }
  if (grouped.size() == 1 && !grouped[0].is_match && grouped[0].begin == 0 && grouped[0].end == in.text.size()) {
    if (!in.text.empty()) out.push_back(std::move(in));
    return;
  }
  for (const auto& g : grouped) {
    if (g.is_match || g.end == g.begin) continue;
    out.push_back({in.text.substr(g.begin, g.end - g.begin), in.at_origin && g.begin == 0});
  }
}

class Split : public PreTokenizerStep {
 public:
  Split(Pattern pattern, Behaviour behaviour, bool invert)
      : pattern_(std::move(pattern)), behaviour_(behaviour), invert_(invert) {}
  void split(Piece&& in, std::vector<Piece>& out) const override {
    auto matches = pattern_.find_all(in.text);
    split_at_matches(std::move(in), matches, invert_, behaviour_, out);
  }

 private:
  Pattern pattern_;
  Behaviour behaviour_;
  bool invert_;
};

// GPT-2's word pattern, which ByteLevel applies when use_regex is set.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevel : public PreTokenizerStep {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, bool map_to_alphabet)
      : add_prefix_space_(add_prefix_space), map_to_alphabet_(map_to_alphabet) {
    if (use_regex) words_ = Pattern::regex(kGpt2Pattern);
  }
  void split(Piece&& in, std::vector<Piece>& out) const override {
    if (add_prefix_space_ && in.text.rfind(' ', 0) != 0) in.text.insert(0, " ");
    size_t first = out.size();
    if (words_) {
      auto matches = words_->find_all(in.text);
      split_at_matches(std::move(in), matches, false, Behaviour::Isolated, out);
    } else if (!in.text.empty()) {
      out.push_back(std::move(in));
    }
    if (map_to_alphabet_)
      for (size_t i = first; i < out.size(); ++i) out[i].text = byte_level_encode(out[i].text);
  }

 private:
  bool add_prefix_space_, map_to_alphabet_;
  std::optional<Pattern> words_;
};

class Metaspace : public PreTokenizerStep {
 public:
  enum class Prepend { Always, First, Never };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void split(Piece&& in, std::vector<Piece>& out) const override {
    in.text = Pattern::literal(" ").replace_all(in.text, replacement_);
    bool starts = in.text.rfind(replacement_, 0) == 0;
    if (!starts && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && in.at_origin)))
      in.text.insert(0, replacement_);
    if (!split_) {
      if (!in.text.empty()) out.push_back(std::move(in));
      return;
    }
    auto matches = Pattern::literal(replacement_).find_all(in.text);
    split_at_matches(std::move(in), matches, false, Behaviour::MergedWithNext, out);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  if (!j.is_null()) p.add(j);
  // A trailing ByteLevel step leaves raw bytes; the model spells them in the alphabet.
  if (p.trailing_byte_level_) {
    p.steps_.back() = std::make_shared<ByteLevel>(p.trailing_byte_level_->first, p.trailing_byte_level_->second, false);
    p.words_are_raw_bytes_ = true;
  }
  return p;
}

void PreTokenizer::add(const nlohmann::json& j) {
  std::string type = j.at("type").get<std::string>();
  trailing_byte_level_.reset();
  if (type == "Sequence") {
    for (const auto& step : j.at("pretokenizers")) add(step);
  } else if (type == "Split") {
    steps_.push_back(std::make_shared<Split>(Pattern::from_json(j.at("pattern")),
                                             behaviour_from_name(j.at("behavior").get<std::string>()),
                                             j.value("invert", false)));
  } else if (type == "ByteLevel") {
    bool add_prefix_space = j.value("add_prefix_space", true), use_regex = j.value("use_regex", true);
    steps_.push_back(std::make_shared<ByteLevel>(add_prefix_space, use_regex, true));
    trailing_byte_level_ = {add_prefix_space, use_regex};
  } else if (type == "Digits") {
    steps_.push_back(std::make_shared<Split>(
        Pattern::regex(std::string("[") + kDigitsClass + "]"),
        j.value("individual_digits", false) ? Behaviour::Isolated : Behaviour::Contiguous, false));
  } else if (type == "Punctuation") {
    steps_.push_back(std::make_shared<Split>(Pattern::regex(std::string("[") + kPunctuationClass + "]"),
                                             behaviour_from_name(j.value("behavior", std::string("Isolated"))), false));
  } else if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
    Metaspace::Prepend prepend =
        scheme == "always"  ? Metaspace::Prepend::Always
        : scheme == "first" ? Metaspace::Prepend::First
        : scheme == "never" ? Metaspace::Prepend::Never
                            : throw Error("The Metaspace prepend_scheme '" + scheme + "' is not supported by onecat.");
    steps_.push_back(std::make_shared<Metaspace>(j.value("replacement", std::string("\xE2\x96\x81")), prepend,
                                                 j.value("split", true)));
  } else {
    throw Error("The tokenizer's pre-tokenizer '" + type + "' is not supported by onecat.");
  }
}

void PreTokenizer::split(Piece piece, std::vector<Piece>& words) const {
  if (steps_.empty()) {
    if (!piece.text.empty()) words.push_back(std::move(piece));
    return;
  }
  std::vector<Piece> current, next;
  current.push_back(std::move(piece));
  for (size_t s = 0; s < steps_.size(); ++s) {
    std::vector<Piece>& target = s + 1 == steps_.size() ? words : next;
    for (auto& p : current) steps_[s]->split(std::move(p), target);
    if (s + 1 < steps_.size()) {
      current.swap(next);
      next.clear();
    }
  }
}

}  // namespace onecat::tokenizer
