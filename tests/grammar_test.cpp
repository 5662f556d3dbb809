// Constrained decoding (engine/grammar, engine/json_schema): the JSON grammar accepts what a JSON
// parser accepts; every text a random walk through a schema's token masks completes is valid
// under an independent validator written here; the masks equal a token-by-token check on a
// synthetic and a real (Qwen2) vocabulary; token bytes rebuild the text; bad schemas are refused.
#include "engine/grammar.h"

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/json_schema.h"
#include "engine/regex_grammar.h"
#include "models/tokenizer/tokenizer.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace onecat::engine;
using nlohmann::ordered_json;

namespace {

// Every single byte but a few, and random strings over a JSON-ish alphabet (some sharing
// prefixes, some repeated with other ids).
std::vector<std::string> synthetic_vocabulary(uint32_t seed) {
  std::vector<std::string> v;
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, char(b)));
  const std::string alphabet = "{}[]\":,-.0123456789eE+ \n\tabcnrstuxyz\\/_AZ";
  std::mt19937 rng(seed);
  for (int i = 0; i < 1500; ++i) {
    const int length = 2 + int(rng() % 6);
    std::string t;
    for (int k = 0; k < length; ++k) t += alphabet[rng() % alphabet.size()];
    v.push_back(t);
  }
  for (const char* t : {"true", "false", "null", "\"name\"", "\": \"", "\",", "{\"", "\"}", "},", "\n  ", "  "}) {
    v.push_back(t);
  }
  v.push_back("");      // a token without bytes (an added token) is never allowed
  v.push_back(v[300]);  // the same bytes under two ids
  return v;
}

std::shared_ptr<GrammarAutomaton> automaton(const Grammar& g, const std::vector<std::string>& vocab,
                                            int64_t extra = 3) {
  return std::make_shared<GrammarAutomaton>(
      g, std::make_shared<const TokenVocabulary>(vocab, int64_t(vocab.size()) + extra));
}

bool matches(GrammarAutomaton& a, std::string_view text) {
  const int32_t s = a.step(a.start(), text);
  return s != GrammarAutomaton::kDead && a.accepting(s);
}

// A random JSON value over a small alphabet, nesting at most `depth`.
ordered_json random_value(std::mt19937& rng, int depth) {
  const int kind = int(rng() % (depth > 0 ? 8 : 6));
  auto word = [&] {
    std::string s;
    static const std::vector<std::string> chars{
        "a", "b", " ", "z", "\"", "\\", "/", "\t", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x01"};
    for (int i = int(rng() % 6); i > 0; --i) s += chars[rng() % chars.size()];
    return s;
  };
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return bool(rng() % 2);
    case 2:
      return int64_t(rng() % 2000) - 1000;
    case 3:
      return double(int64_t(rng() % 20000) - 10000) / 64.0;
    case 4:
      return word();
    case 5:
      return 1.5e-300 * double(rng() % 7);
    case 6: {
      ordered_json o = ordered_json::object();
      for (int i = int(rng() % 4); i > 0; --i) o[word()] = random_value(rng, depth - 1);
      return o;
    }
    default: {
      ordered_json a = ordered_json::array();
      for (int i = int(rng() % 4); i > 0; --i) a.push_back(random_value(rng, depth - 1));
      return a;
    }
  }
}

// RFC 8259's syntax with json_schema.h's bounds on a number's digits, checked by recursive
// descent (nlohmann's parser also refuses numbers a double cannot hold, which JSON allows).
class JsonSyntax {
 public:
  static bool check(const std::string& text) {
    JsonSyntax s(text);
    const bool ok = s.value(0);
    s.ws();
    return ok && s.i_ == text.size() && utf8(text);
  }

 private:
  explicit JsonSyntax(const std::string& t) : t_(t) {}
  static bool utf8(const std::string& t) {
    try {
      (void)ordered_json(t).dump();  // dump() refuses invalid UTF-8
      return true;
    } catch (const nlohmann::json::type_error&) {
      return false;
    }
  }
  char at() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool word(const char* w) {
    const size_t n = std::strlen(w);
    if (t_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  // 1 … most digits (json_schema.h's bounds on a number's parts).
  bool digits(int most) {
    const size_t from = i_;
    while (std::isdigit(static_cast<unsigned char>(at()))) ++i_;
    return i_ > from && i_ - from <= size_t(most);
  }
  bool number() {
    if (at() == '-') ++i_;
    if (at() == '0') {
      ++i_;
    } else if (!digits(kMaxIntegerDigits)) {
      return false;
    }
    if (at() == '.' && (++i_, !digits(kMaxFractionDigits))) return false;
    if (at() == 'e' || at() == 'E') {
      ++i_;
      if (at() == '+' || at() == '-') ++i_;
      if (!digits(kMaxExponentDigits)) return false;
    }
    return true;
  }
  bool string() {
    ++i_;
    while (i_ < t_.size()) {
      const unsigned char c = static_cast<unsigned char>(t_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      const char e = at();
      ++i_;
      if (e == 'u') {
        for (int k = 0; k < 4; ++k, ++i_) {
          if (!std::isxdigit(static_cast<unsigned char>(at()))) return false;
        }
      } else if (!std::strchr("\"\\/bfnrt", e) || e == '\0') {
        return false;
      }
    }
    return false;
  }
  bool value(int depth) {
    ws();
    if (depth > 64) return false;
    const char c = at();
    if (c == '"') return string();
    if (c == 't') return word("true");
    if (c == 'f') return word("false");
    if (c == 'n') return word("null");
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    if (c != '{' && c != '[') return false;
    const char close = c == '{' ? '}' : ']';
    ++i_;
    ws();
    if (at() == close) return ++i_, true;
    while (true) {
      if (c == '{') {
        ws();
        if (at() != '"' || !string()) return false;
        ws();
        if (at() != ':') return false;
        ++i_;
      }
      if (!value(depth + 1)) return false;
      ws();
      if (at() == close) return ++i_, true;
      if (at() != ',') return false;
      ++i_;
    }
  }
  const std::string& t_;
  size_t i_ = 0;
};

bool is_object_text(const std::string& text) { return JsonSyntax::check(text) && !text.empty() && text[0] == '{'; }

TEST(JsonGrammar, AcceptsWhatAJsonParserAccepts) {
  auto a = automaton(json_object_grammar(), synthetic_vocabulary(1));
  std::mt19937 rng(7);
  int accepted = 0, refused = 0;
  const std::string mutations = "{}[]\":,-.019eE+tfnrua\\";
  for (int i = 0; i < 600; ++i) {
    ordered_json o = ordered_json::object();
    for (int k = int(rng() % 4); k > 0; --k) o["k" + std::to_string(k)] = random_value(rng, 3);
    const std::string compact = o.dump(), pretty = o.dump(2), spaced = o.dump(-1, ' ', false);
    ASSERT_TRUE(matches(*a, compact)) << compact;
    ASSERT_TRUE(matches(*a, pretty)) << pretty;
    // Every prefix of a valid text can still be completed.
    for (size_t cut = 0; cut < compact.size(); ++cut) {
      ASSERT_NE(a->step(a->start(), compact.substr(0, cut)), GrammarAutomaton::kDead) << compact.substr(0, cut);
      ASSERT_FALSE(a->accepting(a->step(a->start(), compact.substr(0, cut)))) << compact.substr(0, cut);
    }
    EXPECT_TRUE(a->finished(a->step(a->start(), compact)));  // nothing follows a whole object
    (void)spaced;
    // Mutants (no whitespace bytes): the grammar agrees with the parser.
    for (int m = 0; m < 8; ++m) {
      std::string t = compact;
      const int edits = 1 + int(rng() % 2);
      for (int e = 0; e < edits && !t.empty(); ++e) {
        const size_t at = rng() % t.size();
        const char c = mutations[rng() % mutations.size()];
        switch (rng() % 3) {
          case 0:
            t[at] = c;
            break;
          case 1:
            t.insert(at, 1, c);
            break;
          default:
            t.erase(at, 1);
        }
      }
      if (t.find_first_of(" \t\n\r") != std::string::npos) continue;
      const bool valid = is_object_text(t);
      EXPECT_EQ(matches(*a, t), valid) << t;
      (valid ? accepted : refused) += 1;
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 1000);
}

TEST(JsonGrammar, WhitespaceIsBounded) {
  auto a = automaton(json_object_grammar(), synthetic_vocabulary(1));
  EXPECT_TRUE(matches(*a, "{ \"a\" : 1 }"));
  EXPECT_TRUE(matches(*a, "{\n" + std::string(kMaxIndent, ' ') + "\"a\": [1,\n\t2]\n}"));
  EXPECT_FALSE(matches(*a, "{\n" + std::string(kMaxIndent + 1, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(matches(*a, "{  \"a\": 1}"));  // two spaces: a space or a newline and indent
  EXPECT_FALSE(matches(*a, " {}"));           // nothing around the value
  EXPECT_FALSE(matches(*a, "{} "));
  EXPECT_FALSE(matches(*a, "[1]"));  // json_object: an object
}

// ---------------------------------------------------------------------------------------------
// An independent validator for the schema keywords json_schema_grammar takes (docs/serve.md),
// with its rules: properties listed → no others unless additionalProperties says so.
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool valid(const ordered_json& v, const ordered_json& s, const ordered_json& root);

bool valid_type(const ordered_json& v, const std::string& type, const ordered_json& s, const ordered_json& root) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  // An integer past 64 bits parses as a double.
  if (type == "integer") return v.is_number_integer() || (v.is_number_float() && std::abs(v.get<double>()) > 9e18);
  if (type == "number") return v.is_number();
  if (type == "string") {
    if (!v.is_string()) return false;
    const size_t n = code_points(v.get<std::string>());
    return n >= s.value("minLength", size_t(0)) && (!s.contains("maxLength") || n <= s["maxLength"].get<size_t>());
  }
  if (type == "object") {
    if (!v.is_object()) return false;
    const ordered_json props = s.value("properties", ordered_json::object());
    for (const auto& r : s.value("required", ordered_json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!valid(x, props[k], root)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!valid(x, s["additionalProperties"], root)) return false;
      } else if (s.contains("properties")) {
        return false;
      }
    }
    return true;
  }
  if (type == "array") {
    if (!v.is_array()) return false;
    const ordered_json prefix = s.value("prefixItems", ordered_json::array());
    if (v.size() < s.value("minItems", size_t(0))) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < prefix.size()) {
        if (!valid(v[i], prefix[i], root)) return false;
      } else if (s.contains("items")) {
        if (!valid(v[i], s["items"], root)) return false;
      } else if (!prefix.empty()) {
        return false;
      }
    }
    return true;
  }
  return false;
}

bool valid(const ordered_json& v, const ordered_json& s, const ordered_json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    if (ref == "#") return valid(v, root, root);
    return valid(v, root.at(ordered_json::json_pointer(ref.substr(1))), root);
  }
  if (s.value("nullable", false) && v.is_null()) return true;
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    for (const auto& x : s[key]) {
      if (valid(v, x, root)) return true;
    }
    return false;
  }
  if (s.contains("allOf")) return valid(v, s["allOf"][0], root);
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const auto& x : s["enum"]) {
      if (v == x) return true;
    }
    return false;
  }
  if (!s.contains("type")) {
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      return valid_type(v, "object", s, root);
    }
    return true;
  }
  if (s["type"].is_string()) return valid_type(v, s["type"], s, root);
  for (const auto& t : s["type"]) {
    if (valid_type(v, t, s, root)) return true;
  }
  return false;
}

std::vector<ordered_json> schemas() {
  return {
      ordered_json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}},
          "required": ["name", "age"]})"),
      ordered_json::parse(R"({"type": "object", "properties": {"kind": {"enum": ["a", "b", 3, null]},
          "ok": {"type": "boolean"}, "score": {"type": ["number", "null"]}}, "required": ["kind", "ok", "score"]})"),
      ordered_json::parse(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
          "$ref": "#/$defs/node"})"),
      ordered_json::parse(R"({"type": "array", "prefixItems": [{"const": "x"}, {"type": "integer"}],
          "minItems": 1})"),
      ordered_json::parse(R"({"type": "object", "properties": {"id": {"type": "string", "minLength": 2,
          "maxLength": 4}}, "additionalProperties": {"type": "integer"}, "required": ["id"]})"),
      ordered_json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
          "c": {"type": "integer"}}, "required": ["b"]})"),
      ordered_json::parse(R"({"anyOf": [{"type": "object", "properties": {"x": {"type": "number"}},
          "required": ["x"]}, {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3}]})"),
  };
}

TEST(JsonSchemaGrammar, AcceptsValidAndRefusesInvalidInstances) {
  const std::vector<ordered_json> s = schemas();
  const std::vector<std::string> vocab = synthetic_vocabulary(2);
  struct Case {
    size_t schema;
    std::string text;
  };
  const std::vector<Case> good{
      {0, R"({"name":"ann","age":3})"},
      {0, R"({"name": "", "age": -12, "tags": ["ab", "c"]})"},
      {0, "{\n  \"name\": \"x\",\n  \"age\": 0\n}"},
      {1, R"({"kind":3,"ok":false,"score":null})"},
      {1, R"({"kind":"b","ok":true,"score":-1.5e3})"},
      {2, R"({"v":1,"next":{"v":2,"next":null}})"},
      {3, R"(["x"])"},
      {3, R"(["x",42])"},
      {4, R"({"id":"ab","z":1,"y":2})"},
      {4, R"({"id":"\u00e9\n\u0041"})"},
      {5, R"({"b":1})"},
      {5, R"({"a":1,"b":2,"c":3})"},
      {5, R"({"b":2,"c":3})"},
      {6, R"({"x":1.25})"},
      {6, R"([true,false,true])"},
  };
  const std::vector<Case> bad{
      {0, R"({"age":3,"name":"ann"})"},  // the schema's order
      {0, R"({"name":"ann"})"},          // age required
      {0, R"({"name":"ann","age":3.5})"},
      {0, R"({"name":"ann","age":3,"x":1})"},  // no other properties
      {0, R"({"name":"a","age":1,"tags":["abcd"]})"},
      {0, R"({"name":"a","age":1,"tags":["a","b","c"]})"},
      {1, R"({"kind":"c","ok":false,"score":null})"},
      {1, R"({"kind":"a","ok":0,"score":null})"},
      {2, R"({"v":1,"next":{"v":2}})"},
      {3, R"([])"},
      {3, R"(["x",1,2])"},
      {3, R"(["y"])"},
      {4, R"({"id":"a"})"},
      {4, R"({"id":"abcde"})"},
      {4, R"({"id":"ab","z":"s"})"},
      {5, R"({})"},
      {5, R"({"a":1,"c":3})"},
      {5, R"({"b":1,"a":2})"},
      {6, R"([true])"},
      {6, R"({"y":1})"},
  };
  std::vector<std::shared_ptr<GrammarAutomaton>> a;
  for (const auto& x : s) a.push_back(automaton(json_schema_grammar(x), vocab));
  for (const Case& c : good) {
    EXPECT_TRUE(valid(ordered_json::parse(c.text), s[c.schema], s[c.schema])) << "validator: " << c.text;
    EXPECT_TRUE(matches(*a[c.schema], c.text)) << c.schema << ": " << c.text;
  }
  for (const Case& c : bad) {
    EXPECT_FALSE(matches(*a[c.schema], c.text)) << c.schema << ": " << c.text;
  }
}

// Random walks through the masks: every text that completes parses and is valid.
TEST(JsonSchemaGrammar, EveryCompletedWalkIsValid) {
  const std::vector<std::string> vocab = synthetic_vocabulary(3);
  const int32_t end = int32_t(vocab.size());  // an end id past the tokenizer's
  std::mt19937 rng(11);
  std::vector<ordered_json> all = schemas();
  all.push_back(ordered_json::parse(R"({"type": "object"})"));
  for (size_t k = 0; k < all.size(); ++k) {
    auto a = automaton(json_schema_grammar(all[k]), vocab);
    int completed = 0;
    for (int walk = 0; walk < 60; ++walk) {
      GrammarConstraint c(a, {end});
      std::string text;
      for (int step = 0; step < 400 && !c.finished(); ++step) {
        const TokenMask& m = c.allowed();
        std::vector<int32_t> ids;
        for (int32_t id = 0; id <= end; ++id) {
          if (mask_has(m, id)) ids.push_back(id);
        }
        ASSERT_FALSE(ids.empty()) << "schema " << k << " after " << text;
        // Prefer structural tokens half the time, so walks end.
        int32_t pick = ids[rng() % ids.size()];
        if (rng() % 2) {
          std::vector<int32_t> short_ids;
          for (int32_t id : ids) {
            if (id == end || vocab[size_t(id)].size() == 1) short_ids.push_back(id);
          }
          if (!short_ids.empty()) pick = short_ids[rng() % short_ids.size()];
        }
        ASSERT_TRUE(c.allows(pick));
        c.accept(pick);
        if (pick != end) text += vocab[size_t(pick)];
      }
      if (!c.finished()) continue;
      ++completed;
      ASSERT_TRUE(JsonSyntax::check(text)) << "schema " << k << ": " << text;
      ordered_json parsed;
      try {
        parsed = ordered_json::parse(text);
      } catch (const nlohmann::json::out_of_range&) {
        continue;  // a number past a double: valid JSON, but not held by this validator
      }
      EXPECT_TRUE(valid(parsed, all[k], all[k])) << "schema " << k << ": " << text;
    }
    EXPECT_GE(completed, 15) << "schema " << k;
  }
}

// The trie walk's mask against stepping every token's bytes from the state.
void expect_masks_match(GrammarAutomaton& a, const std::vector<std::string>& texts) {
  const TokenVocabulary& v = a.vocabulary();
  for (const std::string& text : texts) {
    const int32_t state = a.step(a.start(), text);
    ASSERT_NE(state, GrammarAutomaton::kDead) << text;
    const std::shared_ptr<const TokenMask> m = a.mask(state);
    int64_t allowed = 0;
    for (int32_t id = 0; id < v.size(); ++id) {
      const std::string& b = v.bytes(id);
      const bool want = !b.empty() && a.step(state, b) != GrammarAutomaton::kDead;
      ASSERT_EQ(mask_has(*m, id), want) << "after " << text << ": token " << id;
      allowed += want;
    }
    EXPECT_GT(allowed, 0) << text;
  }
}

const std::vector<std::string>& prefixes() {
  static const std::vector<std::string> p{"",
                                          "{",
                                          "{\"name\": \"a",
                                          "{\"name\": \"a\\",
                                          "{\"name\":\"ab\",",
                                          "{\"name\":\"ab\",\"age\":1",
                                          "{\"name\":\"ab\",\"age\":-"};
  return p;
}

TEST(GrammarMask, EqualsATokenByTokenCheck) {
  const std::vector<std::string> vocab = synthetic_vocabulary(4);
  auto a = automaton(json_schema_grammar(schemas()[0]), vocab);
  expect_masks_match(*a, prefixes());
  auto any = automaton(json_object_grammar(), vocab);
  expect_masks_match(*any, {"", "{\"a\":[1,{\"b\":", "{\"a\":\"x", "{\"a\":[1.5e"});
}

TEST(GrammarMask, EqualsATokenByTokenCheckOnQwen2) {
  const onecat::tokenizer::Tokenizer tok =
      onecat::tokenizer::Tokenizer::from_gguf(onecat::test::testdata() / "ggml-vocab-qwen2.gguf");
  const std::vector<std::string> bytes = tok.token_bytes();
  auto vocab = std::make_shared<const TokenVocabulary>(bytes, int64_t(bytes.size()) + 128);
  auto a = std::make_shared<GrammarAutomaton>(json_schema_grammar(schemas()[0]), vocab);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int32_t in_string = a->step(a->start(), "{\"name\": \"a");
  a->mask(in_string);
  const double cold = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  const auto t1 = clock::now();
  const int32_t in_key = a->step(a->start(), "{\"name\":\"ab\",");
  a->mask(in_key);
  const double second = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
  RecordProperty("mask_ms_inside_string_cold", std::to_string(cold));
  RecordProperty("mask_ms_after_comma", std::to_string(second));
  std::printf("qwen2 vocabulary (%zu tokens): a mask inside a string %.1f ms (first walk), after a comma %.1f ms\n",
              bytes.size(), cold, second);
  expect_masks_match(*a, prefixes());
  // Added tokens are never text.
  const std::shared_ptr<const TokenMask> m = a->mask(in_string);
  for (int32_t id : tok.eos_token_ids()) EXPECT_FALSE(mask_has(*m, id));
}

TEST(TokenBytes, RebuildTheText) {
  const std::vector<std::string> texts{"Hello world",
                                       "  two  spaces\nand\ttabs",
                                       "caf\xC3\xA9 \xE2\x82\xAC 5",
                                       "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
                                       "emoji \xF0\x9F\x98\x80\xF0\x9F\x8E\x89 end",
                                       "{\"key\": [1, 2.5, null]}"};
  for (const char* name : {"ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"}) {
    const onecat::tokenizer::Tokenizer tok = onecat::tokenizer::Tokenizer::from_gguf(onecat::test::testdata() / name);
    const std::vector<std::string> bytes = tok.token_bytes();
    ASSERT_EQ(bytes.size(), tok.vocab_size());
    for (const std::string& text : texts) {
      const std::vector<int32_t> ids = tok.encode(text, false);
      std::string joined;
      for (int32_t id : ids) joined += bytes[size_t(id)];
      const std::string decoded = tok.decode(ids);
      // SentencePiece decoders drop the first token's leading space; in the middle of a text it stays.
      if (joined != decoded) {
        EXPECT_EQ(joined, " " + decoded) << name << ": " << text;
      }
      EXPECT_EQ(decoded, text) << name;
    }
    for (int32_t id : tok.eos_token_ids()) {
      if (tok.is_special(id)) {
        EXPECT_TRUE(bytes[size_t(id)].empty()) << name << " " << id;
      }
    }
  }
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotEnforce) {
  struct Case {
    const char* schema;
    const char* says;
  };
  const std::vector<Case> cases{
      {R"({"type": "string", "multipleOf": 2})", "\"multipleOf\""},
      {R"({"type": "object", "properties": {"when": {"type": "string", "format": "ipv6"}}})",
       "at #/properties/when has format 'ipv6'"},
      {R"({"type": "number", "maximum": 3})", "bounds a number"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "allows no integer"},
      {R"({"type": "string", "pattern": "a", "maxLength": 3})", "combines minLength or maxLength"},
      {R"({"$ref": "#/$defs/missing"})", "which the schema does not have"},
      {R"({"$ref": "http://example.com/s.json"})", "only references inside the schema"},
      {R"(false)", "no value matches"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "requires 'b'"},
      {R"({"type": "strin"})", "which JSON schema does not define"},
      {R"({"type": "array", "maxItems": 100000})", "at most 4096"},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "allOf"},
      {R"({"type": "array", "prefixItems": [{}, {}], "items": false, "minItems": 3})", "below minItems"},
      {R"(3)", "an object or a boolean"},
  };
  for (const Case& c : cases) {
    try {
      json_schema_grammar(ordered_json::parse(c.schema));
      ADD_FAILURE() << "accepted " << c.schema;
    } catch (const onecat::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.schema << ": " << e.what();
    }
  }
  // Nesting past kMaxSchemaDepth, by subschemas or by a chain of $refs, is refused before the
  // compiler's recursion can overflow the stack (100 000 levels crashed the server).
  ordered_json deep = ordered_json::object();
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  ordered_json chain = {{"$defs", ordered_json::object()}, {"$ref", "#/$defs/a0"}};
  for (int i = 0; i < 200; ++i)
    chain["$defs"]["a" + std::to_string(i)] = {{"$ref", "#/$defs/a" + std::to_string(i + 1)}};
  chain["$defs"]["a200"] = {{"type", "null"}};
  for (const ordered_json& s : {deep, chain}) {
    onecat::test::expect_throw<onecat::InputError>([&] { json_schema_grammar(s); },
                                                   {"nests subschemas (or $refs) more than 128"});
  }
  // A schema that reaches itself before any text cannot be followed: the request's mistake.
  for (const char* loop :
       {R"({"$ref": "#"})", R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})"}) {
    onecat::test::expect_throw<onecat::InputError>(
        [&] { automaton(json_schema_grammar(ordered_json::parse(loop)), synthetic_vocabulary(2)); },
        {"reaches a rule inside itself before any text"});
  }
}

TEST(GrammarConstraint, EndsAndAllowsEndIdsOnlyWhenWhole) {
  const std::vector<std::string> vocab{"y", "ye", "yes", "n", "no", "x", "s", "o", "e", ""};
  const int32_t end = 10;
  auto a = automaton(choice_grammar({"yes", "no", "nope"}), vocab, 2);
  GrammarConstraint c(a, {end});
  const TokenMask& start = c.allowed();
  std::set<int32_t> allowed;
  for (int32_t id = 0; id < 12; ++id) {
    if (mask_has(start, id)) allowed.insert(id);
  }
  EXPECT_EQ(allowed, (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(c.accept(5), onecat::Error);
  c.accept(3);  // "n"
  EXPECT_FALSE(c.allows(end));
  c.accept(7);  // "no": a whole choice, and "nope" goes on
  EXPECT_TRUE(c.allows(end));
  EXPECT_FALSE(c.finished());
  EXPECT_TRUE(mask_has(c.allowed(), end));
  GrammarConstraint d = *c.fresh();
  d.accept(2);  // "yes": nothing follows
  EXPECT_TRUE(d.finished());
  c.accept(end);
  EXPECT_TRUE(c.finished());
  EXPECT_THROW(choice_grammar({}), onecat::InputError);
}

// A reasoning block first (unconstrained), blanks, then the grammar; or the grammar at once.
TEST(GrammarConstraint, ReasoningGateLetsTheReasoningThrough) {
  const std::vector<std::string> vocab{"{", "}", "x", "\n\n", " ", "\"a\":1", "", ""};
  const int32_t open = 6, close = 7, end = 8;
  auto a = automaton(json_object_grammar(), vocab, 1);
  auto allowed_ids = [](GrammarConstraint& c) {
    std::set<int32_t> ids;
    for (int32_t id = 0; id < 9; ++id) {
      if (mask_has(c.allowed(), id)) ids.insert(id);
    }
    return ids;
  };
  GrammarConstraint c(a, {end}, ReasoningGate{open, close, false});
  EXPECT_TRUE(c.constrains());
  EXPECT_EQ(allowed_ids(c), (std::set<int32_t>{0, open}));
  c.accept(open);
  EXPECT_FALSE(c.constrains());
  c.accept(2), c.accept(3), c.accept(1);  // "x\n\n}" inside the reasoning
  c.accept(close);
  EXPECT_TRUE(c.constrains());
  EXPECT_EQ(allowed_ids(c), (std::set<int32_t>{0, 3, 4}));  // "{" or blanks
  c.accept(3);
  EXPECT_THROW(c.accept(2), onecat::Error);
  c.accept(0), c.accept(5), c.accept(1);
  EXPECT_TRUE(c.finished());
  // Without reasoning: the grammar at once, and no blanks before it.
  GrammarConstraint d(a, {end}, ReasoningGate{open, close, false});
  d.accept(0);
  EXPECT_FALSE(d.allows(open));
  EXPECT_FALSE(d.allows(close));
  // The prompt opened the reasoning: anything (the end too) until close.
  GrammarConstraint e(a, {end}, ReasoningGate{open, close, true});
  EXPECT_FALSE(e.constrains());
  EXPECT_TRUE(e.allows(2));
  e.accept(end);
  EXPECT_TRUE(e.finished());
}

// ---------------------------------------------------------------------------------------------
// Regular expressions: against std::regex (ECMAScript) on ASCII, both ways: random texts, and
// texts the grammar's own walks complete.
bool regex_matches(GrammarAutomaton& a, const std::string& text) { return matches(a, text); }

TEST(RegexGrammar, AgreesWithStdRegex) {
  const std::vector<std::string> patterns{"a(b|c)*d",
                                          "[a-f0-9]{2,4}-x?",
                                          "(?:ab)+|c{3}",
                                          R"(\d+\.\d{1,2})",
                                          "[^abc]x",
                                          R"(^hello\s+world$)",
                                          "a.c",
                                          R"((\w+@)?\w+)",
                                          "x{0,3}y{2,}",
                                          R"([\-\]a]+b)",
                                          "(a|ab)(c|bcd)(d*)",
                                          "[a-c]*?c+?",
                                          R"(\x41\u0042[\t ]?)",
                                          "(?<name>ab|ba){2}",
                                          R"([\d\s]{1,3}\D)",
                                          "a{3}|b{1,}|c?",
                                          "((a)|b)+",
                                          R"(\W\w\S)",
                                          "(?:)a",
                                          "[.]\\.+"};
  // std::regex has no named groups: the same pattern without the name.
  auto oracle_of = [](std::string p) { return p == "(?<name>ab|ba){2}" ? std::string("(ab|ba){2}") : p; };
  const std::string alphabet = "abcdxy-.019 \tAB@_hello world\\]";
  std::mt19937 rng(5);
  for (const std::string& p : patterns) {
    const std::regex oracle(oracle_of(p), std::regex::ECMAScript);
    auto a = automaton(regex_grammar(p), synthetic_vocabulary(9));
    int positive = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string t;
      for (int k = int(rng() % 9); k > 0; --k) t += alphabet[rng() % alphabet.size()];
      const bool want = std::regex_match(t, oracle);
      ASSERT_EQ(regex_matches(*a, t), want) << p << " on '" << t << "'";
      positive += want;
    }
    // Walks: random bytes among those the grammar allows, stopped at random once it accepts.
    int walks = 0;
    for (int w = 0; w < 300; ++w) {
      std::string t;
      int32_t s = a->start();
      for (int step = 0; step < 40; ++step) {
        if (a->accepting(s) && rng() % 3 == 0) break;
        std::vector<int> next;
        for (int b = 0; b < 128; ++b) {
          if (a->step(s, uint8_t(b)) != GrammarAutomaton::kDead) next.push_back(b);
        }
        if (next.empty()) break;
        const int b = next[rng() % next.size()];
        t += char(b);
        s = a->step(s, uint8_t(b));
      }
      if (!a->accepting(s)) continue;
      ++walks;
      ASSERT_TRUE(std::regex_match(t, oracle)) << p << " walked to '" << t << "'";
    }
    EXPECT_GT(walks, 50) << p;
    (void)positive;
  }
}

TEST(RegexGrammar, CharactersAreCodePoints) {
  auto a = automaton(regex_grammar("[\xCE\xB1-\xCF\x89]+\xC3\xA9"), synthetic_vocabulary(9));  // [α-ω]+é
  EXPECT_TRUE(matches(*a, "\xCE\xB1\xCE\xB2\xCE\xB3\xC3\xA9"));
  EXPECT_FALSE(matches(*a,
                       "\xCE\xB1"
                       "a\xC3\xA9"));
  auto dot = automaton(regex_grammar("a.b"), synthetic_vocabulary(9));
  EXPECT_TRUE(matches(*dot,
                      "a\xE2\x82\xAC"
                      "b"));  // € is one character
  EXPECT_TRUE(matches(*dot,
                      "a\xF0\x9F\x98\x80"
                      "b"));
  EXPECT_FALSE(matches(*dot,
                       "a\xE2\x82\xAC\xE2\x82\xAC"
                       "b"));
  EXPECT_FALSE(matches(*dot, "a\nb"));
  EXPECT_FALSE(matches(*dot,
                       "a\xE2\x82"
                       "b"));  // part of a character
  EXPECT_FALSE(matches(*dot,
                       "a\xED\xA0\x80"
                       "b"));  // a surrogate
  auto negated = automaton(regex_grammar("[^a]"), synthetic_vocabulary(9));
  EXPECT_TRUE(matches(*negated, "\xE4\xBD\xA0"));
  EXPECT_TRUE(matches(*negated, "\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_FALSE(matches(*negated, "\xF4\x90\x80\x80"));
  EXPECT_FALSE(matches(*negated, "a"));
}

TEST(RegexGrammar, IntegerRangesAreExact) {
  std::mt19937 rng(3);
  std::vector<std::pair<int64_t, int64_t>> ranges{{0, 0},
                                                  {-5, 99},
                                                  {7, 7},
                                                  {-100, -3},
                                                  {13, 1307},
                                                  {0, 99999},
                                                  {-1, 1},
                                                  {1, 9},
                                                  {10, 10000},
                                                  {-999, 0},
                                                  {42, 999'999'999'999'999'999}};
  for (int i = 0; i < 20; ++i) {
    const int64_t lo = int64_t(rng() % 20000) - 10000, hi = lo + int64_t(rng() % 5000);
    ranges.push_back({lo, hi});
  }
  for (auto [lo, hi] : ranges) {
    const std::string r = integer_range_regex(lo, hi);
    // std::regex runs out of states on the 18-digit ranges: the arithmetic alone judges those.
    const bool small = hi < 1'000'000;
    const std::regex oracle(small ? r : std::string("x"), std::regex::ECMAScript);
    auto a = automaton(regex_grammar(r), synthetic_vocabulary(9));
    std::vector<int64_t> probes{lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, 1, 9, 10, 99, 100, 101, 999, 1000};
    for (int k = 0; k < 40; ++k) probes.push_back(lo + int64_t(rng() % uint64_t(hi - lo + 1)));
    for (int64_t x : probes) {
      const bool want = x >= lo && x <= hi;
      EXPECT_EQ(matches(*a, std::to_string(x)), want) << "[" << lo << ", " << hi << "] " << x;
      if (small) {
        EXPECT_EQ(std::regex_match(std::to_string(x), oracle), want) << r;
      }
    }
    EXPECT_FALSE(matches(*a, "-0"));
    EXPECT_FALSE(matches(*a, "0" + std::to_string(std::max<int64_t>(lo, 1))));
  }
}

TEST(JsonSchemaGrammar, PatternsFormatsAndIntegerBounds) {
  const std::vector<std::string> vocab = synthetic_vocabulary(6);
  auto schema = [&](const char* text) { return automaton(json_schema_grammar(ordered_json::parse(text)), vocab); };
  // pattern: a search over the string's characters, written as JSON writes them.
  auto p = schema(R"({"type": "string", "pattern": "^[a\"\\\\]+$"})");
  EXPECT_TRUE(matches(*p, R"("a\"\\a")"));
  EXPECT_FALSE(matches(*p, R"("ab")"));
  EXPECT_FALSE(matches(*p, R"("")"));
  auto search = schema(R"({"type": "string", "pattern": "ab"})");
  EXPECT_TRUE(matches(*search, R"("xxabyy")"));
  EXPECT_TRUE(matches(*search, R"("ab")"));
  EXPECT_FALSE(matches(*search, R"("xaxby")"));
  auto lines = schema(R"({"type": "string", "pattern": "^a\nb\t$"})");
  EXPECT_TRUE(matches(*lines, R"("a\nb\t")"));
  EXPECT_FALSE(matches(*lines, "\"a\nb\t\""));  // raw control characters are not JSON
  struct Case {
    const char* format;
    std::vector<std::string> good, bad;
  };
  const std::vector<Case> formats{
      {"date", {"2024-02-29", "1999-12-31"}, {"2024-13-01", "2024-1-01", "24-01-01", "2024-01-32"}},
      {"date-time", {"2024-02-29T23:59:60Z", "2024-02-29T08:00:00.123+05:30"}, {"2024-02-29", "2024-02-29T24:00:00Z"}},
      {"time", {"00:00:00Z", "12:30:59.5-01:00"}, {"12:30", "12:60:00Z"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000"},
       {"123e4567e89b12d3a456426614174000", "g23e4567-e89b-12d3-a456-426614174000"}},
      {"email", {"a.b+c@example.co.uk", "x@y.z"}, {"@example.com", "a@", "a b@c.d", "a@b"}},
      {"ipv4", {"192.168.0.1", "255.255.255.255", "0.0.0.0"}, {"256.1.1.1", "1.2.3", "01.2.3.4"}},
      {"hostname", {"example.com", "a-b.c"}, {"-a.com", "a..b"}},
      {"uri", {"https://example.com/a?b=c", "urn:isbn:123"}, {"//example.com", "a b:c"}},
      {"duration", {"P3Y6M4DT12H30M5S", "PT0.5S", "P2W"}, {"3Y", "P1.5Y"}},
  };
  for (const Case& c : formats) {
    auto a = schema((std::string(R"({"type": "string", "format": ")") + c.format + "\"}").c_str());
    for (const std::string& g : c.good) EXPECT_TRUE(matches(*a, "\"" + g + "\"")) << c.format << " " << g;
    for (const std::string& b : c.bad) EXPECT_FALSE(matches(*a, "\"" + b + "\"")) << c.format << " " << b;
  }
  auto ints = schema(R"({"type": "integer", "minimum": -5, "exclusiveMaximum": 100})");
  for (int64_t x : {-5, 0, 7, 99}) EXPECT_TRUE(matches(*ints, std::to_string(x))) << x;
  for (int64_t x : {-6, 100, 1000}) EXPECT_FALSE(matches(*ints, std::to_string(x))) << x;
  auto draft4 = schema(R"({"type": "integer", "minimum": 1, "exclusiveMinimum": true, "maximum": 3.5})");
  EXPECT_FALSE(matches(*draft4, "1"));
  EXPECT_TRUE(matches(*draft4, "2"));
  EXPECT_TRUE(matches(*draft4, "3"));
  EXPECT_FALSE(matches(*draft4, "4"));
  auto positive = schema(R"({"type": "number", "minimum": 0})");
  EXPECT_TRUE(matches(*positive, "0.5e3"));
  EXPECT_TRUE(matches(*positive, "0"));
  EXPECT_FALSE(matches(*positive, "-0.5"));
  // A type list: the string keywords bind the string, the bounds the integer.
  auto both = schema(R"({"type": ["string", "integer"], "pattern": "^x$", "maximum": 3})");
  EXPECT_TRUE(matches(*both, R"("x")"));
  EXPECT_TRUE(matches(*both, "3"));
  EXPECT_FALSE(matches(*both, "4"));
  EXPECT_FALSE(matches(*both, R"("y")"));
}

TEST(RegexGrammar, RefusesWhatIsNotRegular) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"((a)\1)", "backreference"},  {"a(?=b)", "lookaround"},     {"(?<!a)b", "lookaround"},
      {R"(\bword)", "word boundary"}, {"(ab", "unclosed '('"},      {"ab)", "unmatched ')'"},
      {"a{5,2}", "m below n"},        {"*a", "nothing to repeat"},  {"(a*)*", "can be empty"},
      {"a{1001}", "more than 1000"},  {"a^b", "^ after its start"}, {"a$b", "$ before its end"},
      {"[a", "unclosed '['"},         {"[z-a]", "out of order"},    {"\\", "lone backslash"},
  };
  // Deeper than kMaxRegexNesting: 100 000 groups overflowed the parser's stack (a server crash).
  for (const std::string& deep :
       {std::string(100000, '(') + "a" + std::string(100000, ')'), "a" + std::string(500, '+')}) {
    onecat::test::expect_throw<onecat::InputError>([&] { regex_grammar(deep); }, {"nests more than 100 levels deep"});
  }
  for (const auto& [pattern, says] : cases) {
    try {
      regex_grammar(pattern);
      ADD_FAILURE() << "accepted " << pattern;
    } catch (const onecat::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << pattern << ": " << e.what();
    }
  }
  try {
    json_schema_grammar(ordered_json::parse(R"({"type": "string", "pattern": "(a)\\1"})"));
    ADD_FAILURE() << "accepted a backreference in a schema";
  } catch (const onecat::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("backreference"), std::string::npos) << e.what();
  }
}

// The server's cache: a key made once and shared, the latest kMax kept, an automaton grown past
// its state limit retired for new requests while those on it keep it.
TEST(GrammarCacheTest, SharesEvictsAndRetires) {
  const std::vector<std::string> vocab = synthetic_vocabulary(12);
  auto words = std::make_shared<const TokenVocabulary>(vocab, int64_t(vocab.size()));
  GrammarCache cache(words, 40);
  int made = 0;
  auto make = [&] {
    ++made;
    return json_object_grammar();
  };
  const auto a = cache.get("json_object", make);
  EXPECT_EQ(cache.get("json_object", make), a);
  EXPECT_EQ(made, 1);
  for (size_t i = 0; i < GrammarCache::kMax; ++i)
    cache.get("choice " + std::to_string(i), [] { return choice_grammar({"x"}); });
  EXPECT_NE(cache.get("json_object", make), a) << "evicted after kMax others";
  EXPECT_EQ(made, 2);
  const auto b = cache.get("json_object", make);
  GrammarConstraint c(b, {});
  for (const char* piece : {"{\"a\": [[{\"b\": [", "1, 2, {\"c\": \"x\"}, [true, null]"}) {
    for (char ch : std::string(piece)) {
      c.allowed();
      for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
        if (vocab[size_t(id)] == std::string(1, ch)) {
          c.accept(id);
          break;
        }
      }
    }
  }
  ASSERT_GT(b->states(), 40u);
  const auto fresh = cache.get("json_object", make);
  EXPECT_NE(fresh, b);
  EXPECT_EQ(made, 3);
  EXPECT_FALSE(c.finished());  // the constraint on the retired automaton goes on
  c.accept(int32_t(std::find(vocab.begin(), vocab.end(), "]") - vocab.begin()));
}

}  // namespace
