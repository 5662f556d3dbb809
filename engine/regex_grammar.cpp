#include "engine/regex_grammar.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "base/error.h"

namespace onecat::engine {

namespace {

using Range = std::pair<uint32_t, uint32_t>;  // code points lo … hi
using Ranges = std::vector<Range>;
using Symbols = std::vector<GrammarSymbol>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int64_t kUnbounded = -1;

// Sorted, merged, without the surrogates (which UTF-8 cannot hold).
Ranges normalized(Ranges r) {
  Ranges cut;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    if (lo < 0xD800 && hi > 0xDFFF) {
      cut.push_back({lo, 0xD7FF}), cut.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      cut.push_back({0xE000, hi});
    } else if (hi >= 0xD800 && hi <= 0xDFFF) {
      cut.push_back({lo, 0xD7FF});
    } else {
      cut.push_back({lo, hi});
    }
  }
  std::sort(cut.begin(), cut.end());
  Ranges out;
  for (const Range& x : cut) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : normalized(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalized(out);
}

struct Node {
  enum Kind { kEmpty, kChars, kConcat, kAlt, kRepeat } kind = kEmpty;
  Ranges chars;
  std::vector<Node> kids;
  int64_t min = 0, max = 0;  // kRepeat; max kUnbounded: no limit
  int height = 1;            // levels of nodes from this one down, itself included

  void add(Node kid) {
    height = std::max(height, kid.height + 1);
    kids.push_back(std::move(kid));
  }

  bool nullable() const {
    switch (kind) {
      case kEmpty:
        return true;
      case kChars:
        return false;
      case kConcat:
        return std::all_of(kids.begin(), kids.end(), [](const Node& k) { return k.nullable(); });
      case kAlt:
        return std::any_of(kids.begin(), kids.end(), [](const Node& k) { return k.nullable(); });
      case kRepeat:
        return min == 0 || kids[0].nullable();
    }
    return false;
  }
};

Node chars(Ranges r) {
  Node n;
  n.kind = Node::kChars;
  n.chars = normalized(std::move(r));
  return n;
}

const Ranges& digit() {
  static const Ranges r{{'0', '9'}};
  return r;
}
const Ranges& word() {
  static const Ranges r{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const Ranges& space() {  // ECMAScript's \s
  static const Ranges r{{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  return r;
}

class Parser {
 public:
  explicit Parser(std::string_view pattern) : source_(pattern) {
    for (size_t i = 0; i < pattern.size();) {
      const unsigned char c = static_cast<unsigned char>(pattern[i]);
      const int length = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (length == 0 || i + size_t(length) > pattern.size()) fail("is not valid UTF-8");
      uint32_t cp = length == 1 ? c : c & (0x3F >> (length - 1));
      for (int k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(pattern[i + size_t(k)]) & 0x3F);
      cps_.push_back(cp);
      i += size_t(length);
    }
  }

  Node parse(bool& starts, bool& ends) {
    starts = !cps_.empty() && cps_[0] == '^';
    if (starts) ++at_;
    Node n = alternation();
    ends = ended_;
    if (at_ != cps_.size()) fail("has an unmatched ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("the regular expression " + quoted_input(source_) + " " + what + ".");
  }
  bool done() const { return at_ >= cps_.size(); }
  // Parsing, emitting and freeing a pattern recurse once per level: a hostile pattern nesting
  // 100 000 groups (or stacking as many quantifiers) would overflow the stack.
  void check_height(const Node& n) const {
    if (n.height > kMaxRegexNesting) fail("nests more than " + std::to_string(kMaxRegexNesting) + " levels deep");
  }
  uint32_t peek(size_t ahead = 0) const { return at_ + ahead < cps_.size() ? cps_[at_ + ahead] : 0xFFFFFFFF; }

  Node alternation() {
    Node first = sequence();
    if (peek() != '|') return first;
    Node alt;
    alt.kind = Node::kAlt;
    alt.add(std::move(first));
    while (peek() == '|') {
      ++at_;
      alt.add(sequence());
    }
    check_height(alt);
    return alt;
  }

  Node sequence() {
    Node seq;
    seq.kind = Node::kConcat;
    while (!done() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {  // the end anchor: only the pattern's last character
        if (at_ + 1 != cps_.size()) fail("has $ before its end, which is not supported");
        ++at_;
        ended_ = true;
        continue;
      }
      seq.add(quantified());
    }
    if (seq.kids.size() == 1) return std::move(seq.kids[0]);
    if (seq.kids.empty()) return Node{};
    check_height(seq);
    return seq;
  }

  // {n}, {n,}, {n,m} at at_ (after its '{'): true and the bounds, or false (a literal '{').
  bool braces(int64_t& min, int64_t& max) {
    size_t i = at_;
    auto number = [&](int64_t& v) {
      const size_t from = i;
      v = 0;
      while (i < cps_.size() && cps_[i] >= '0' && cps_[i] <= '9') {
        v = std::min<int64_t>(v * 10 + (cps_[i] - '0'), 1 << 30);
        ++i;
      }
      return i > from;
    };
    if (!number(min)) return false;
    max = min;
    if (i < cps_.size() && cps_[i] == ',') {
      ++i;
      if (!number(max)) max = kUnbounded;
    }
    if (i >= cps_.size() || cps_[i] != '}') return false;
    at_ = i + 1;
    return true;
  }

  Node quantified() {
    Node atom_node = atom();
    for (;;) {
      int64_t min = 0, max = 0;
      const uint32_t c = peek();
      if (c == '*') {
        min = 0, max = kUnbounded, ++at_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++at_;
      } else if (c == '?') {
        min = 0, max = 1, ++at_;
      } else if (c == '{') {
        ++at_;
        if (!braces(min, max)) {
          --at_;
          return atom_node;
        }
        if (max != kUnbounded && max < min) fail("has a {n,m} with m below n");
      } else {
        return atom_node;
      }
      if (peek() == '?') ++at_;  // lazy: the same texts
      if (min > kMaxRegexRepeat || max > kMaxRegexRepeat) {
        fail("repeats more than " + std::to_string(kMaxRegexRepeat) + " times");
      }
      if (max == kUnbounded && atom_node.nullable()) fail("repeats without limit something that can be empty");
      Node r;
      r.kind = Node::kRepeat;
      r.min = min, r.max = max;
      r.add(std::move(atom_node));
      check_height(r);
      atom_node = std::move(r);
    }
  }

  Node atom() {
    const uint32_t c = cps_[at_++];
    switch (c) {
      case '(': {
        if (++groups_ > kMaxRegexNesting) fail("nests more than " + std::to_string(kMaxRegexNesting) + " levels deep");
        if (peek() == '?') {
          if (peek(1) == ':') {
            at_ += 2;
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            at_ += 2;
            while (!done() && peek() != '>') ++at_;
            if (done()) fail("has an unfinished group name");
            ++at_;
          } else {
            fail("has a lookaround, which is not supported");
          }
        }
        Node inner = alternation();
        if (peek() != ')') fail("has an unclosed '('");
        ++at_;
        --groups_;
        return inner;
      }
      case '[':
        return char_class();
      case '.':
        return chars(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      case '\\':
        return escape(false);
      case '^':
        fail("has ^ after its start, which is not supported");
      case '*':
      case '+':
      case '?':
        fail("has a quantifier with nothing to repeat");
      case ')':
        fail("has an unmatched ')'");
      default:
        return chars({{c, c}});
    }
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const uint32_t c = peek();
      int d = c >= '0' && c <= '9'   ? int(c - '0')
              : c >= 'a' && c <= 'f' ? int(c - 'a' + 10)
              : c >= 'A' && c <= 'F' ? int(c - 'A' + 10)
                                     : -1;
      if (d < 0) fail("has a bad hexadecimal escape");
      v = v * 16 + uint32_t(d), ++at_;
    }
    return v;
  }

  // After a '\\': a class or one character (in_class: \b is a backspace there).
  Node escape(bool in_class) {
    if (done()) fail("ends with a lone backslash");
    const uint32_t c = cps_[at_++];
    switch (c) {
      case 'd':
        return chars(digit());
      case 'D':
        return chars(complement(digit()));
      case 'w':
        return chars(word());
      case 'W':
        return chars(complement(word()));
      case 's':
        return chars(space());
      case 'S':
        return chars(complement(space()));
      case 't':
        return chars({{'\t', '\t'}});
      case 'n':
        return chars({{'\n', '\n'}});
      case 'r':
        return chars({{'\r', '\r'}});
      case 'f':
        return chars({{'\f', '\f'}});
      case 'v':
        return chars({{'\v', '\v'}});
      case '0':
        return chars({{0, 0}});
      case 'x': {
        const uint32_t v = hex(2);
        return chars({{v, v}});
      }
      case 'u': {
        uint32_t v;
        if (peek() == '{') {
          ++at_;
          v = 0;
          int n = 0;
          while (!done() && peek() != '}') v = v * 16 + hex(1), ++n;
          if (done() || n == 0 || v > kMaxCodePoint) fail("has a bad \\u{…} escape");
          ++at_;
        } else {
          v = hex(4);
        }
        return chars({{v, v}});
      }
      case 'b':
        if (in_class) return chars({{8, 8}});
        fail("has a word boundary (\\b), which is not supported");
      case 'B':
        fail("has a word boundary (\\B), which is not supported");
      case 'k':
        fail("has a backreference, which is not supported");
      case 'c':
        fail("has a control escape (\\c), which is not supported");
      default:
        if (c >= '1' && c <= '9') fail("has a backreference, which is not supported");
        return chars({{c, c}});
    }
  }

  Node char_class() {
    const bool negated = peek() == '^';
    if (negated) ++at_;
    Ranges r;
    bool first = true;
    while (!done() && (peek() != ']' || first)) {
      first = false;
      Node lo = class_atom();
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++at_;
        Node hi = class_atom();
        if (lo.chars.size() != 1 || hi.chars.size() != 1 || lo.chars[0].first != lo.chars[0].second ||
            hi.chars[0].first != hi.chars[0].second) {
          fail("has a class range with a class at one end");
        }
        if (hi.chars[0].first < lo.chars[0].first) fail("has a class range out of order");
        r.push_back({lo.chars[0].first, hi.chars[0].first});
      } else {
        r.insert(r.end(), lo.chars.begin(), lo.chars.end());
      }
    }
    if (done()) fail("has an unclosed '['");
    ++at_;
    Node n = chars(negated ? complement(r) : r);
    if (n.chars.empty()) fail("has a class that matches nothing");
    return n;
  }

  Node class_atom() {
    const uint32_t c = cps_[at_++];
    if (c == '\\') return escape(true);
    return chars({{c, c}});
  }

  std::string source_;
  std::vector<uint32_t> cps_;
  size_t at_ = 0;
  bool ended_ = false;
  int groups_ = 0;  // groups open at at_
};

// UTF-8 byte-range sequences for code points lo … hi (one code-point length each; a sequence's
// trailing bytes always span whole ranges), Russ Cox's split.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      utf8_sequences(lo, edge, out);
      utf8_sequences(edge + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out.push_back({{uint8_t(lo), uint8_t(hi)}});
    return;
  }
  const int n = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  auto encode = [n](uint32_t cp) {
    std::vector<uint8_t> b(static_cast<size_t>(n));
    for (int k = n - 1; k > 0; --k) b[size_t(k)] = uint8_t(0x80 | (cp & 0x3F)), cp >>= 6;
    b[0] = uint8_t((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | cp);
    return b;
  };
  const std::vector<uint8_t> a = encode(lo), b = encode(hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int k = 0; k < n; ++k) seq.push_back({a[size_t(k)], b[size_t(k)]});
  out.push_back(std::move(seq));
}

class Emitter {
 public:
  Emitter(Grammar& g, RegexText text) : g_(g), text_(text) {}

  Symbols emit(const Node& n) {
    switch (n.kind) {
      case Node::kEmpty:
        return {};
      case Node::kChars:
        return {char_symbol(n.chars)};
      case Node::kConcat: {
        Symbols out;
        for (const Node& k : n.kids) {
          Symbols s = emit(k);
          out.insert(out.end(), s.begin(), s.end());
        }
        return out;
      }
      case Node::kAlt: {
        const int r = g_.add_rule("regex alternatives");
        for (const Node& k : n.kids) g_.add(r, emit(k));
        return {Grammar::ref(r)};
      }
      case Node::kRepeat:
        return repeat(n);
    }
    return {};
  }

 private:
  // One byte's set when the whole class is written as single bytes here.
  bool single_bytes(const Ranges& r, ByteSet& set) const {
    for (auto [lo, hi] : r) {
      for (uint32_t c = lo; c <= hi; ++c) {
        if (c >= 0x80) return false;
        if (text_ == RegexText::kJsonString && (c < 0x20 || c == '"' || c == '\\')) return false;
        set.set(c);
      }
    }
    return true;
  }

  GrammarSymbol char_symbol(const Ranges& r) {
    ByteSet set;
    if (single_bytes(r, set)) return Grammar::set(set);
    auto [it, inserted] = classes_.try_emplace(r, -1);
    if (!inserted) return Grammar::ref(it->second);
    const int rule = g_.add_rule("regex class");
    it->second = rule;
    ByteSet ascii;
    for (auto [lo, hi] : r) {
      for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x7F); ++c) {
        if (text_ == RegexText::kJsonString && (c < 0x20 || c == '"' || c == '\\')) {
          g_.add(rule, Grammar::literal(json_escape(c)));
        } else {
          ascii.set(c);
        }
      }
      if (hi < 0x80) continue;
      std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
      utf8_sequences(std::max<uint32_t>(lo, 0x80), hi, seqs);
      for (const auto& seq : seqs) {
        Symbols s;
        for (auto [a, b] : seq) s.push_back(Grammar::set(Grammar::range(a, b)));
        g_.add(rule, std::move(s));
      }
    }
    if (ascii.any()) g_.add(rule, {Grammar::set(ascii)});
    return Grammar::ref(rule);
  }

  static std::string json_escape(uint32_t c) {
    switch (c) {
      case '"':
        return "\\\"";
      case '\\':
        return "\\\\";
      case '\b':
        return "\\b";
      case '\f':
        return "\\f";
      case '\n':
        return "\\n";
      case '\r':
        return "\\r";
      case '\t':
        return "\\t";
      default: {
        static const char* digits = "0123456789abcdef";
        return std::string("\\u00") + digits[c >> 4] + digits[c & 15];
      }
    }
  }

  Symbols repeat(const Node& n) {
    Symbols item = emit(n.kids[0]);
    // x* of a single byte set: a star, no rule.
    if (item.size() == 1 && item[0].kind == GrammarSymbol::kByte && n.max == kUnbounded) {
      Symbols out;
      for (int64_t k = 0; k < n.min; ++k) out.push_back(item[0]);
      out.push_back(Grammar::star(item[0].bytes));
      return out;
    }
    if (item.size() != 1) {
      const int r = g_.add_rule("regex item");
      g_.add(r, item);
      item = {Grammar::ref(r)};
    }
    Symbols out;
    for (int64_t k = 0; k < n.min; ++k) out.push_back(item[0]);
    if (n.max == kUnbounded) {
      const int more = g_.add_rule("regex repeat");
      g_.add(more, {});
      g_.add(more, {item[0], Grammar::ref(more)});
      out.push_back(Grammar::ref(more));
    } else if (n.max > n.min) {
      // optional[k]: up to k more.
      int next = g_.add_rule("regex optional");
      g_.add(next, {});
      for (int64_t k = 1; k < n.max - n.min; ++k) {
        const int r = g_.add_rule("regex optional");
        g_.add(r, {});
        g_.add(r, {item[0], Grammar::ref(next)});
        next = r;
      }
      const int first = g_.add_rule("regex optional");
      g_.add(first, {});
      g_.add(first, {item[0], Grammar::ref(next)});
      out.push_back(Grammar::ref(first));
    }
    return out;
  }

  Grammar& g_;
  RegexText text_;
  std::map<Ranges, int> classes_;
};

// [lo, hi] of non-negative integers whose decimal forms have the same length.
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo == hi) return lo;
  if (lo.size() == 1) return "[" + lo + "-" + hi + "]";
  const size_t tail = lo.size() - 1;
  if (lo.substr(1) == std::string(tail, '0') && hi.substr(1) == std::string(tail, '9')) {
    return "[" + lo.substr(0, 1) + "-" + hi.substr(0, 1) + "]\\d{" + std::to_string(tail) + "}";
  }
  if (lo[0] == hi[0]) return lo.substr(0, 1) + "(?:" + same_length(lo.substr(1), hi.substr(1)) + ")";
  const size_t rest = lo.size() - 1;
  std::string out = lo.substr(0, 1) + "(?:" + same_length(lo.substr(1), std::string(rest, '9')) + ")";
  if (lo[0] + 1 <= hi[0] - 1) {
    out += "|[" + std::string(1, char(lo[0] + 1)) + "-" + std::string(1, char(hi[0] - 1)) + "]\\d{" +
           std::to_string(rest) + "}";
  }
  out += "|" + hi.substr(0, 1) + "(?:" + same_length(std::string(rest, '0'), hi.substr(1)) + ")";
  return out;
}

// [lo, hi] of non-negative integers, hi < 10^18. Whole digit counts in a row (every d-digit
// number, d ≥ 2) are one [1-9]\d{m,n}, so an open-ended bound stays a small automaton.
std::string natural_range(uint64_t lo, uint64_t hi) {
  std::vector<std::string> parts;
  int whole_from = 0, whole_to = 0;  // a run of whole digit counts not yet written
  auto flush = [&] {
    if (whole_from == 0) return;
    parts.push_back("[1-9]\\d{" + std::to_string(whole_from - 1) +
                    (whole_to > whole_from ? "," + std::to_string(whole_to - 1) : std::string()) + "}");
    whole_from = whole_to = 0;
  };
  uint64_t low = 0, high = 9;  // the d-digit numbers
  for (int d = 1; d <= 18; ++d, low = high + 1, high = high * 10 + 9) {
    const uint64_t a = std::max(lo, low), b = std::min(hi, high);
    if (a > b) continue;
    if (d >= 2 && a == low && b == high) {
      if (whole_from == 0) whole_from = d;
      whole_to = d;
      continue;
    }
    flush();
    parts.push_back(same_length(std::to_string(a), std::to_string(b)));
  }
  flush();
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "|") + std::string("(?:") + p + ")";
  return out;
}

}  // namespace

int add_regex(Grammar& g, std::string_view pattern, RegexText text, bool search) {
  Parser parser(pattern);
  bool starts = false, ends = false;
  const Node root = parser.parse(starts, ends);
  Emitter e(g, text);
  // A search matches inside any text: any characters before it unless ^, after it unless $.
  Node any;
  any.kind = Node::kRepeat, any.min = 0, any.max = kUnbounded;
  any.add(chars({{0, kMaxCodePoint}}));
  Symbols body;
  const Node* parts[] = {search && !starts ? &any : nullptr, &root, search && !ends ? &any : nullptr};
  for (const Node* n : parts) {
    if (!n) continue;
    Symbols s = e.emit(*n);
    body.insert(body.end(), s.begin(), s.end());
  }
  const int r = g.add_rule("regex");
  g.add(r, std::move(body));
  return r;
}

Grammar regex_grammar(std::string_view pattern) {
  Grammar g;
  g.set_root(add_regex(g, pattern, RegexText::kRaw));
  return g;
}

std::string integer_range_regex(int64_t lo, int64_t hi) {
  constexpr int64_t kLimit = 999'999'999'999'999'999;  // 18 digits (json_schema.h's bound)
  if (lo > hi)
    throw InputError("an integer range from " + std::to_string(lo) + " to " + std::to_string(hi) + " is empty.");
  lo = std::max(lo, -kLimit), hi = std::min(hi, kLimit);
  std::string out;
  if (hi >= 0) out = natural_range(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi));
  if (lo < 0) {
    // −1 … −|lo| (and never −0)
    const std::string negative = "-(?:" + natural_range(uint64_t(std::max<int64_t>(1, -hi)), uint64_t(-lo)) + ")";
    out = out.empty() ? negative : negative + "|" + out;
  }
  return out;
}

}  // namespace onecat::engine
