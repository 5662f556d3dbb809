#include "engine/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "base/error.h"
#include "engine/regex_grammar.h"

namespace onecat::engine {

namespace {

using nlohmann::ordered_json;
using Symbols = std::vector<GrammarSymbol>;

Symbols cat(std::initializer_list<Symbols> parts) {
  Symbols out;
  for (const Symbols& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Symbols one(GrammarSymbol s) { return {s}; }

class JsonGrammar {
 public:
  JsonGrammar() {
    ws_ = g_.add_rule("ws");
    // ws ::= "" | " " | "\n" indent_0;  indent_k ::= "" | [ \t] indent_k+1
    int indent = g_.add_rule("indent");
    const int first_indent = indent;
    ByteSet blank;
    blank.set(' '), blank.set('\t');
    for (int k = 0; k < kMaxIndent; ++k) {
      const int next = g_.add_rule("indent");
      g_.add(indent, {});
      g_.add(indent, {Grammar::set(blank), Grammar::ref(next)});
      indent = next;
    }
    g_.add(indent, {});
    g_.add(ws_, {});
    g_.add(ws_, Grammar::literal(" "));
    g_.add(ws_, {Grammar::byte('\n'), Grammar::ref(first_indent)});
  }

  Grammar& grammar() { return g_; }
  Symbols ws() const { return {Grammar::ref(ws_)}; }

  // "…" with any characters: a run of plain bytes, then an escape and more, or the end.
  int string() {
    if (string_ >= 0) return string_;
    string_ = g_.add_rule("string");
    // chars ::= ascii* more;  more ::= "" | (escape | multibyte) chars: one star head inside a
    // string, so the state after a plain character is the state before it.
    const int chars = g_.add_rule("chars"), more = g_.add_rule("chars");
    g_.add(chars, {Grammar::star(ascii()), Grammar::ref(more)});
    g_.add(more, {});
    g_.add(more, {Grammar::ref(escape()), Grammar::ref(chars)});
    g_.add(more, {Grammar::ref(multibyte()), Grammar::ref(chars)});
    g_.add(string_, {Grammar::byte('"'), Grammar::ref(chars), Grammar::byte('"')});
    return string_;
  }

  // A string of min … max characters (max < 0: no limit), one rule per counted character.
  int string(int64_t min, int64_t max) {
    const int s = g_.add_rule("string{" + std::to_string(min) + "," + std::to_string(max) + "}");
    // c_j: after j characters.
    std::vector<int> c;
    const int64_t last = max >= 0 ? max : min;
    for (int64_t j = 0; j <= last; ++j) c.push_back(g_.add_rule("chars"));
    for (int64_t j = 0; j <= last; ++j) {
      const int rule = c[size_t(j)];
      if (j >= min) g_.add(rule, {});
      if (j < last) g_.add(rule, {Grammar::ref(character()), Grammar::ref(c[size_t(j + 1)])});
      if (max < 0 && j == last) g_.add(rule, {Grammar::ref(character()), Grammar::ref(rule)});
    }
    g_.add(s, {Grammar::byte('"'), Grammar::ref(c[0]), Grammar::byte('"')});
    return s;
  }

  int integer() {
    if (integer_ >= 0) return integer_;
    integer_ = g_.add_rule("integer");
    g_.add(integer_, {Grammar::ref(natural())});
    g_.add(integer_, {Grammar::byte('-'), Grammar::ref(natural())});
    return integer_;
  }

  int number() {
    if (number_ >= 0) return number_;
    number_ = g_.add_rule("number");
    const int digits = digit_run(1, kMaxFractionDigits);
    const int exponent_digits = digit_run(1, kMaxExponentDigits);
    const int fraction = g_.add_rule("fraction");
    g_.add(fraction, {});
    g_.add(fraction, {Grammar::byte('.'), Grammar::ref(digits)});
    const int exponent = g_.add_rule("exponent");
    ByteSet e, sign;
    e.set('e'), e.set('E'), sign.set('+'), sign.set('-');
    g_.add(exponent, {});
    g_.add(exponent, {Grammar::set(e), Grammar::ref(exponent_digits)});
    g_.add(exponent, {Grammar::set(e), Grammar::set(sign), Grammar::ref(exponent_digits)});
    g_.add(number_, {Grammar::ref(integer()), Grammar::ref(fraction), Grammar::ref(exponent)});
    fraction_ = fraction, exponent_ = exponent;
    return number_;
  }

  // A number without a minus sign (minimum 0).
  int unsigned_number() {
    number();
    const int r = g_.add_rule("unsigned number");
    g_.add(r, {Grammar::ref(natural()), Grammar::ref(fraction_), Grammar::ref(exponent_)});
    return r;
  }

  int literal_rule(const std::string& name, const std::string& text) {
    auto [it, inserted] = literals_.try_emplace(text, -1);
    if (inserted) {
      it->second = g_.add_rule(name);
      g_.add(it->second, Grammar::literal(text));
    }
    return it->second;
  }

  // Any JSON value, object and array.
  int value() {
    if (value_ >= 0) return value_;
    value_ = g_.add_rule("value");
    object_ = g_.add_rule("object");
    array_ = g_.add_rule("array");
    for (int r : {object_, array_, string(), number()}) g_.add(value_, {Grammar::ref(r)});
    for (const char* word : {"true", "false", "null"}) g_.add(value_, Grammar::literal(word));
    const int member = g_.add_rule("member");
    g_.add(member, cat({one(Grammar::ref(string())), ws(), Grammar::literal(":"), ws(), one(Grammar::ref(value_))}));
    bracketed(object_, "{", member, "}");
    bracketed(array_, "[", value_, "]");
    return value_;
  }
  // rule ::= open ws close | open ws element ws more close;  more ::= "" | "," ws element ws more
  void bracketed(int rule, const char* open, int element, const char* close) {
    const int more = g_.add_rule(std::string(open) + " more");
    g_.add(more, {});
    g_.add(more, cat({Grammar::literal(","), ws(), one(Grammar::ref(element)), ws(), one(Grammar::ref(more))}));
    g_.add(rule, cat({Grammar::literal(open), ws(), Grammar::literal(close)}));
    g_.add(rule, cat({Grammar::literal(open), ws(), one(Grammar::ref(element)), ws(), one(Grammar::ref(more)),
                      Grammar::literal(close)}));
  }

  int object() { return value(), object_; }
  int array() { return value(), array_; }

 private:
  // A string's one-byte characters: printable ASCII and DEL but the quote and the backslash.
  static ByteSet ascii() {
    ByteSet s = Grammar::range(0x20, 0x7F);
    s.reset('"'), s.reset('\\');
    return s;
  }
  // A well-formed UTF-8 sequence of two to four bytes (RFC 3629: no overlong forms, no
  // surrogates, nothing past U+10FFFF).
  int multibyte() {
    if (multibyte_ >= 0) return multibyte_;
    multibyte_ = g_.add_rule("utf8");
    const auto r = [](unsigned char lo, unsigned char hi) { return Grammar::set(Grammar::range(lo, hi)); };
    const GrammarSymbol tail = r(0x80, 0xBF);
    g_.add(multibyte_, {r(0xC2, 0xDF), tail});
    g_.add(multibyte_, {r(0xE0, 0xE0), r(0xA0, 0xBF), tail});
    g_.add(multibyte_, {r(0xE1, 0xEC), tail, tail});
    g_.add(multibyte_, {r(0xED, 0xED), r(0x80, 0x9F), tail});
    g_.add(multibyte_, {r(0xEE, 0xEF), tail, tail});
    g_.add(multibyte_, {r(0xF0, 0xF0), r(0x90, 0xBF), tail, tail});
    g_.add(multibyte_, {r(0xF1, 0xF3), tail, tail, tail});
    g_.add(multibyte_, {r(0xF4, 0xF4), r(0x80, 0x8F), tail, tail});
    return multibyte_;
  }
  int escape() {
    if (escape_ >= 0) return escape_;
    escape_ = g_.add_rule("escape");
    ByteSet simple, hex = Grammar::range('0', '9') | Grammar::range('a', 'f') | Grammar::range('A', 'F');
    for (char c : std::string("\"\\/bfnrt")) simple.set(size_t(static_cast<unsigned char>(c)));
    g_.add(escape_, {Grammar::byte('\\'), Grammar::set(simple)});
    g_.add(escape_, {Grammar::byte('\\'), Grammar::byte('u'), Grammar::set(hex), Grammar::set(hex), Grammar::set(hex),
                     Grammar::set(hex)});
    return escape_;
  }
  // One character of a string: an ASCII byte, a UTF-8 sequence or an escape.
  int character() {
    if (character_ >= 0) return character_;
    character_ = g_.add_rule("char");
    g_.add(character_, {Grammar::set(ascii())});
    g_.add(character_, {Grammar::ref(multibyte())});
    g_.add(character_, {Grammar::ref(escape())});
    return character_;
  }
  int natural() {
    if (natural_ >= 0) return natural_;
    natural_ = g_.add_rule("natural");
    g_.add(natural_, Grammar::literal("0"));
    g_.add(natural_, {Grammar::set(Grammar::range('1', '9')), Grammar::ref(digit_run(0, kMaxIntegerDigits - 1))});
    return natural_;
  }
  // min … max decimal digits.
  int digit_run(int min, int max) {
    std::vector<int> after;  // after[j]: j digits written
    for (int j = 0; j <= max; ++j) after.push_back(g_.add_rule("digits"));
    for (int j = 0; j <= max; ++j) {
      if (j >= min) g_.add(after[size_t(j)], {});
      if (j < max)
        g_.add(after[size_t(j)], {Grammar::set(Grammar::range('0', '9')), Grammar::ref(after[size_t(j + 1)])});
    }
    return after[0];
  }

  Grammar g_;
  int ws_ = -1, string_ = -1, escape_ = -1, character_ = -1, multibyte_ = -1, natural_ = -1, integer_ = -1,
      number_ = -1;
  int value_ = -1, object_ = -1, array_ = -1, fraction_ = -1, exponent_ = -1;
  std::map<std::string, int> literals_;
};

// Keywords that describe and never constrain.
const std::set<std::string>& annotations() {
  static const std::set<std::string> k{"title", "description", "default",    "examples", "$schema",
                                       "$id",   "$comment",    "deprecated", "readOnly", "writeOnly",
                                       "$defs", "definitions", "strict",     "name"};
  return k;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const ordered_json& root) : root_(root) {}

  Grammar compile(std::string_view suffix) {
    const int top = compile(root_, "#");
    if (suffix.empty()) {
      j_.grammar().set_root(top);
    } else {
      const int r = j_.grammar().add_rule("root");
      j_.grammar().add(r, cat({one(Grammar::ref(top)), Grammar::literal(suffix)}));
      j_.grammar().set_root(r);
    }
    return std::move(j_.grammar());
  }

 private:
  [[noreturn]] static void refuse(const std::string& path, const std::string& what) {
    throw InputError("the JSON schema " + (path == "#" ? std::string("root") : "at " + path) + " " + what);
  }

  int compile(const ordered_json& s, const std::string& path) {
    // Each subschema and $ref is a level of recursion here: a schema nesting 100 000 levels
    // (JSON text in guided_json, or a chain of $refs) would overflow the stack.
    if (depth_ >= kMaxSchemaDepth) {
      refuse(path.substr(0, 200),
             "nests subschemas (or $refs) more than " + std::to_string(kMaxSchemaDepth) + " levels deep.");
    }
    ++depth_;
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse(path, "is false, which no value matches.");
      return j_.value();
    }
    if (!s.is_object()) refuse(path, "must be an object or a boolean.");
    static const std::set<std::string> known{"type",
                                             "properties",
                                             "required",
                                             "additionalProperties",
                                             "items",
                                             "prefixItems",
                                             "minItems",
                                             "maxItems",
                                             "enum",
                                             "const",
                                             "anyOf",
                                             "oneOf",
                                             "allOf",
                                             "$ref",
                                             "minLength",
                                             "maxLength",
                                             "nullable",
                                             "pattern",
                                             "format",
                                             "minimum",
                                             "maximum",
                                             "exclusiveMinimum",
                                             "exclusiveMaximum"};
    for (const auto& [key, value] : s.items()) {
      if (known.count(key) || annotations().count(key)) continue;
      if (key == "uniqueItems" && value == false) continue;
      refuse(path, "uses \"" + key + "\", which onecat cannot enforce yet.");
    }
    if (s.contains("$ref")) {
      only(s, path, {"$ref"});
      return reference(s["$ref"], path);
    }
    if (s.contains("allOf")) {
      only(s, path, {"allOf"});
      const ordered_json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        refuse(path, "uses allOf with other than one schema, which onecat cannot merge yet.");
      return compile(all[0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      only(s, path, {key, "nullable"});
      const ordered_json& list = s[key];
      if (!list.is_array() || list.empty())
        refuse(path, std::string("has an ") + key + " that is not a non-empty array.");
      const int r = j_.grammar().add_rule(key);
      for (size_t i = 0; i < list.size(); ++i) {
        j_.grammar().add(r, {Grammar::ref(compile(list[i], path + "/" + key + "/" + std::to_string(i)))});
      }
      if (nullable(s, path)) j_.grammar().add(r, {Grammar::ref(j_.literal_rule("null", "null"))});
      return r;
    }
    if (s.contains("const")) return literals(path, {s["const"]});
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) refuse(path, "has an enum that is not a non-empty array.");
      std::vector<ordered_json> values(s["enum"].begin(), s["enum"].end());
      return literals(path, values);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const ordered_json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) refuse(path, "has a type list with a non-string entry.");
          types.push_back(x.get<std::string>());
        }
      } else {
        refuse(path, "has a type that is neither a string nor a non-empty array of strings.");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types.push_back("string");
    } else if (bounded(s)) {
      types.push_back("number");
    } else {
      return j_.value();
    }
    if (nullable(s, path)) types.push_back("null");
    const int r = j_.grammar().add_rule(path);
    for (const std::string& type : types) j_.grammar().add(r, {Grammar::ref(typed(s, type, path))});
    return r;
  }

  static bool nullable(const ordered_json& s, const std::string& path) {
    if (!s.contains("nullable")) return false;
    if (!s["nullable"].is_boolean()) refuse(path, "has a nullable that is not a boolean.");
    return s["nullable"].get<bool>();
  }

  void only(const ordered_json& s, const std::string& path, std::initializer_list<const char*> allowed) {
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key)) continue;
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : " or ") + std::string(a);
        refuse(path, "combines \"" + key + "\" with " + list + ", which onecat cannot merge yet.");
      }
    }
  }

  int literals(const std::string& path, const std::vector<ordered_json>& values) {
    const int r = j_.grammar().add_rule(path + " (enum)");
    for (const ordered_json& v : values) j_.grammar().add(r, Grammar::literal(v.dump()));
    return r;
  }

  int reference(const ordered_json& ref, const std::string& path) {
    if (!ref.is_string()) refuse(path, "has a $ref that is not a string.");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#')
      refuse(path, "refers to " + quoted_input(target) + "; only references inside the schema (#/…) are supported.");
    const ordered_json* at = &root_;
    if (target.size() > 1) {
      if (target[1] != '/') refuse(path, "has a $ref " + quoted_input(target) + " that is not a JSON pointer.");
      size_t from = 2;
      while (from <= target.size()) {
        size_t to = target.find('/', from);
        if (to == std::string::npos) to = target.size();
        std::string token = target.substr(from, to - from);
        for (size_t p; (p = token.find("~1")) != std::string::npos;) token.replace(p, 2, "/");
        for (size_t p; (p = token.find("~0")) != std::string::npos;) token.replace(p, 2, "~");
        if (!at->is_object() || !at->contains(token))
          refuse(path, "refers to " + quoted_input(target) + ", which the schema does not have.");
        at = &(*at)[token];
        from = to + 1;
      }
    }
    // The rule exists before its body, so a schema may refer to itself.
    const int r = j_.grammar().add_rule(target);
    refs_[target] = r;
    j_.grammar().add(r, {Grammar::ref(compile(*at, target))});
    return r;
  }

  static int64_t count(const ordered_json& s, const char* key, const std::string& path, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const ordered_json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      refuse(path, std::string("has a ") + key + " that is not a non-negative integer.");
    if (v.get<int64_t>() > kMaxCountedRepeat) {
      refuse(path, std::string("has ") + key + " " + std::to_string(v.get<int64_t>()) + "; onecat enforces at most " +
                       std::to_string(kMaxCountedRepeat) + ".");
    }
    return v.get<int64_t>();
  }

  int typed(const ordered_json& s, const std::string& type, const std::string& path) {
    if (type == "string") {
      const int64_t min = count(s, "minLength", path, 0), max = count(s, "maxLength", path, -1);
      if (max >= 0 && max < min) refuse(path, "has maxLength below minLength.");
      if (s.contains("pattern") || s.contains("format")) {
        if (s.contains("minLength") || s.contains("maxLength")) {
          refuse(path, "combines minLength or maxLength with pattern or format, which onecat cannot enforce yet.");
        }
        if (s.contains("pattern") && s.contains("format")) refuse(path, "has both pattern and format.");
        return patterned(s, path);
      }
      return min == 0 && max < 0 ? j_.string() : j_.string(min, max);
    }
    if (type == "integer") return bounded_integer(s, path);
    if (type == "number") {
      if (!bounded(s)) return j_.number();
      // Only a lower bound of 0 (included) is written exactly: a number without its minus sign.
      if (s.contains("minimum") && s["minimum"] == 0 && !s.contains("maximum") && !s.contains("exclusiveMinimum") &&
          !s.contains("exclusiveMaximum")) {
        return j_.unsigned_number();
      }
      refuse(path, "bounds a number other than by minimum 0, which onecat cannot enforce yet (integers it can).");
    }
    if (type == "boolean") {
      const int r = j_.grammar().add_rule("boolean");
      j_.grammar().add(r, Grammar::literal("true"));
      j_.grammar().add(r, Grammar::literal("false"));
      return r;
    }
    if (type == "null") return j_.literal_rule("null", "null");
    if (type == "object") return object(s, path);
    if (type == "array") return array(s, path);
    refuse(path, "has type " + quoted_input(type) + ", which JSON schema does not define.");
  }

  static bool bounded(const ordered_json& s) {
    return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
           s.contains("exclusiveMaximum");
  }

  // An integer within minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft 4's boolean
  // exclusive forms too), as a regex of its decimal forms.
  int bounded_integer(const ordered_json& s, const std::string& path) {
    if (!bounded(s)) return j_.integer();
    constexpr double kMost = 999'999'999'999'999'999.0;
    double lo = -kMost, hi = kMost;
    auto bound = [&](const char* key) -> std::optional<double> {
      if (!s.contains(key) || s[key].is_boolean()) return std::nullopt;
      if (!s[key].is_number()) refuse(path, std::string("has a ") + key + " that is not a number.");
      return s[key].get<double>();
    };
    const bool draft4_low = s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == true;
    const bool draft4_high = s.contains("exclusiveMaximum") && s["exclusiveMaximum"] == true;
    if (auto v = bound("minimum")) lo = std::max(lo, draft4_low ? std::floor(*v) + 1 : std::ceil(*v));
    if (auto v = bound("maximum")) hi = std::min(hi, draft4_high ? std::ceil(*v) - 1 : std::floor(*v));
    if (auto v = bound("exclusiveMinimum")) lo = std::max(lo, std::floor(*v) + 1);
    if (auto v = bound("exclusiveMaximum")) hi = std::min(hi, std::ceil(*v) - 1);
    lo = std::max(lo, -kMost), hi = std::min(hi, kMost);
    if (lo > hi) refuse(path, "allows no integer: its bounds exclude every one.");
    const std::string regex = integer_range_regex(int64_t(lo), int64_t(hi));
    return add_regex(j_.grammar(), regex, RegexText::kRaw);
  }

  // A string matching `pattern` (a search, as JSON schema means it) or one of the formats.
  int patterned(const ordered_json& s, const std::string& path) {
    std::string regex;
    bool search = false;
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) refuse(path, "has a pattern that is not a string.");
      regex = s["pattern"].get<std::string>();
      search = true;
    } else {
      if (!s["format"].is_string()) refuse(path, "has a format that is not a string.");
      const std::string format = s["format"];
      regex = format_regex(format);
      if (regex.empty()) {
        refuse(path, "has format " + quoted_input(format) +
                         ", which onecat cannot enforce yet (it can date, time, date-time, duration, uuid, email, "
                         "hostname, ipv4, uri).");
      }
    }
    Grammar& g = j_.grammar();
    int body;
    try {
      body = add_regex(g, regex, RegexText::kJsonString, search);
    } catch (const InputError& e) {
      refuse(path, std::string("has a pattern onecat cannot take: ") + e.what());
    }
    const int r = g.add_rule(path + " string");
    g.add(r, {Grammar::byte('"'), Grammar::ref(body), Grammar::byte('"')});
    return r;
  }

  // JSON schema's formats as regexes (RFC 3339 dates and times, RFC 4122 UUIDs; e-mail,
  // hostnames and URIs in their common shapes); empty for a format without one here.
  static std::string format_regex(const std::string& format) {
    const std::string date = R"(\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))";
    const std::string time =
        R"((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
    // A DNS label (its 63-byte limit left out: counting it would multiply the automaton's states).
    const std::string label = R"([A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)";
    const std::string octet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
    if (format == "date") return date;
    if (format == "time") return time;
    if (format == "date-time") return date + "[Tt ]" + time;
    if (format == "duration") {
      return R"(P(?:\d{1,9}W|(?:\d{1,9}Y)?(?:\d{1,9}M)?(?:\d{1,9}D)?(?:T(?:\d{1,9}H)?(?:\d{1,9}M)?(?:\d{1,9}(?:\.\d{1,9})?S)?)?))";
    }
    if (format == "uuid") return R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
    if (format == "email")
      return R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@)" + label + R"((?:\.)" + label +
             ")+";
    if (format == "hostname") return label + R"((?:\.)" + label + ")*";
    if (format == "ipv4") return octet + R"((?:\.)" + octet + "){3}";
    if (format == "uri") return R"([A-Za-z][A-Za-z0-9+.-]*:[^\s"<>\\^`{|}]+)";
    return "";
  }

  int object(const ordered_json& s, const std::string& path) {
    const bool listed = s.contains("properties");
    if (listed && !s["properties"].is_object()) refuse(path, "has properties that are not an object.");
    if (!listed && !s.contains("additionalProperties") && !s.contains("required")) return j_.object();
    struct Property {
      std::string name;
      int value;
      bool required;
    };
    std::vector<Property> props;
    if (listed) {
      for (const auto& [name, sub] : s["properties"].items())
        props.push_back({name, compile(sub, path + "/properties/" + name), false});
    }
    if (s.contains("required")) {
      const ordered_json& req = s["required"];
      if (!req.is_array()) refuse(path, "has a required that is not an array.");
      for (const auto& name : req) {
        if (!name.is_string()) refuse(path, "has a required entry that is not a string.");
        auto it = std::find_if(props.begin(), props.end(),
                               [&](const Property& p) { return p.name == name.get<std::string>(); });
        if (it == props.end())
          refuse(path, "requires " + quoted_input(name.get<std::string>()) + ", which its properties do not list.");
        it->required = true;
      }
    }
    int extra = -1;  // the value rule of other properties
    if (s.contains("additionalProperties")) {
      const ordered_json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) extra = compile(a, path + "/additionalProperties");
    } else if (!listed) {
      extra = j_.value();
    }
    Grammar& g = j_.grammar();
    // tail[i][first]: properties i… with none written yet (first) or after one.
    const size_t n = props.size();
    std::vector<std::array<int, 2>> tail(n + 1, {-1, -1});
    for (size_t i = n + 1; i-- > 0;) {
      for (int first = 0; first < 2; ++first) tail[i][size_t(first)] = g.add_rule(path + " properties");
    }
    auto comma = [&](int first) { return first ? Symbols{} : cat({Grammar::literal(","), j_.ws()}); };
    for (int first = 0; first < 2; ++first) {
      const int r = tail[n][size_t(first)];
      g.add(r, {});
      if (extra >= 0) {
        g.add(r, cat({comma(first), one(Grammar::ref(j_.string())), j_.ws(), Grammar::literal(":"), j_.ws(),
                      one(Grammar::ref(extra)), j_.ws(), one(Grammar::ref(tail[n][0]))}));
      }
    }
    for (size_t i = n; i-- > 0;) {
      const std::string key = ordered_json(props[i].name).dump();
      for (int first = 0; first < 2; ++first) {
        const int r = tail[i][size_t(first)];
        g.add(r, cat({comma(first), Grammar::literal(key), j_.ws(), Grammar::literal(":"), j_.ws(),
                      one(Grammar::ref(props[i].value)), j_.ws(), one(Grammar::ref(tail[i + 1][0]))}));
        if (!props[i].required) g.add(r, {Grammar::ref(tail[i + 1][size_t(first)])});
      }
    }
    const int r = g.add_rule(path + " object");
    g.add(r, cat({Grammar::literal("{"), j_.ws(), one(Grammar::ref(tail[0][1])), Grammar::literal("}")}));
    return r;
  }

  int array(const ordered_json& s, const std::string& path) {
    std::vector<int> prefix;
    if (s.contains("prefixItems")) {
      const ordered_json& p = s["prefixItems"];
      if (!p.is_array()) refuse(path, "has prefixItems that are not an array.");
      for (size_t i = 0; i < p.size(); ++i) prefix.push_back(compile(p[i], path + "/prefixItems/" + std::to_string(i)));
    }
    int items = -1;  // further items' rule (-1: none)
    if (s.contains("items")) {
      const ordered_json& it = s["items"];
      if (it.is_array()) {  // draft 4's tuple form
        if (!prefix.empty()) refuse(path, "has both prefixItems and an items array.");
        for (size_t i = 0; i < it.size(); ++i) prefix.push_back(compile(it[i], path + "/items/" + std::to_string(i)));
      } else if (!(it.is_boolean() && !it.get<bool>())) {
        items = compile(it, path + "/items");
      }
    } else if (prefix.empty()) {
      items = j_.value();
    }
    const int64_t min = count(s, "minItems", path, 0);
    int64_t max = count(s, "maxItems", path, -1);
    if (items < 0) max = max < 0 ? int64_t(prefix.size()) : std::min<int64_t>(max, int64_t(prefix.size()));
    if (max >= 0 && max < min) refuse(path, "allows no array: maxItems (or its prefixItems) below minItems.");
    Grammar& g = j_.grammar();
    // after[j]: j items written; beyond `last` (no maxItems) the rule repeats itself.
    const int64_t last = max >= 0 ? max : std::max<int64_t>(min, int64_t(prefix.size()) + 1);
    std::vector<int> after;
    for (int64_t j = 0; j <= last; ++j) after.push_back(g.add_rule(path + " items"));
    for (int64_t j = 0; j <= last; ++j) {
      const int r = after[size_t(j)];
      if (j >= min) g.add(r, {});
      const bool more = j < last || max < 0;
      if (!more) continue;
      const int item = j < int64_t(prefix.size()) ? prefix[size_t(j)] : items;
      const int next = j < last ? after[size_t(j + 1)] : r;
      Symbols lead = j == 0 ? Symbols{} : cat({Grammar::literal(","), j_.ws()});
      g.add(r, cat({lead, one(Grammar::ref(item)), j_.ws(), one(Grammar::ref(next))}));
    }
    const int r = g.add_rule(path + " array");
    g.add(r, cat({Grammar::literal("["), j_.ws(), one(Grammar::ref(after[0])), Grammar::literal("]")}));
    return r;
  }

  const ordered_json& root_;
  JsonGrammar j_;
  std::map<std::string, int> refs_;
  int depth_ = 0;  // compile calls on the stack
};

}  // namespace

Grammar json_object_grammar() {
  JsonGrammar j;
  j.grammar().set_root(j.object());
  return std::move(j.grammar());
}

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, std::string_view suffix) {
  return SchemaCompiler(schema).compile(suffix);
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) throw InputError("a choice needs at least one string to choose from.");
  Grammar g;
  const int r = g.add_rule("choice");
  for (const std::string& c : choices) {
    if (c.empty()) throw InputError("a choice must not be the empty string.");
    g.add(r, Grammar::literal(c));
  }
  g.set_root(r);
  return g;
}

}  // namespace onecat::engine
