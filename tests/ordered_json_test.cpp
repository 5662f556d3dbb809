// chat::parse_ordered_json against nlohmann's own ordered parse on fresh random documents
// (duplicate keys, every value type, nesting), its errors and depth limit, and an object of
// 100,000 keys (n²/2 lookups in the ordered parse) against a map built beside the text.
#include "models/chat/ordered_json.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

using nlohmann::json;
using nlohmann::ordered_json;
using onecat::chat::json_nests_deeper;
using onecat::chat::parse_ordered_json;
using onecat::chat::to_ordered_json;

namespace {

// A random JSON text: objects reuse keys from a small pool, so duplicates are common.
std::string random_text(std::mt19937& rng, int depth) {
  const int kind = int(rng() % (depth > 0 ? 8 : 6));
  switch (kind) {
    case 0:
      return "null";
    case 1:
      return rng() % 2 ? "true" : "false";
    case 2:
      return std::to_string(int64_t(rng()) - int64_t(1) * 0x7fffffff);
    case 3:
      return std::to_string(uint64_t(rng()) << 32 | rng());
    case 4:
      return std::to_string(double(rng()) / 977.0) + "e" + std::to_string(int(rng() % 40) - 20);
    case 5:
      return "\"s[{" + std::to_string(rng() % 100) + "\\u00e9\\n\\\"}\"";
    case 6: {
      std::string out = "[";
      for (int i = 0, n = int(rng() % 5); i < n; ++i) out += (i ? "," : "") + random_text(rng, depth - 1);
      return out + "]";
    }
    default: {
      std::string out = "{";
      for (int i = 0, n = int(rng() % 7); i < n; ++i) {
        out += std::string(i ? "," : "") + "\"k" + std::to_string(rng() % 9) + "\":" + random_text(rng, depth - 1);
      }
      return out + "}";
    }
  }
}

// The text's nesting as nlohmann's parser reports it (a repeated key's dropped value counts).
int depth_of(const std::string& text) {
  int deepest = 0;
  const json parsed = json::parse(text, [&](int depth, json::parse_event_t event, json&) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      deepest = std::max(deepest, depth + 1);
    }
    return true;
  });
  return deepest;
}

}  // namespace

TEST(OrderedJson, NestingIsMeasuredOutsideStrings) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_text(rng, 1 + i % 8);
    const int depth = depth_of(text);
    EXPECT_FALSE(json_nests_deeper(text, depth)) << "seed " << seed << ": " << text;
    if (depth > 0) {
      EXPECT_TRUE(json_nests_deeper(text, depth - 1)) << "seed " << seed << ": " << text;
    }
  }
  EXPECT_FALSE(json_nests_deeper(R"(["[[[[{", "\"[[{\\", {"[": "]]]"}])", 2));
  EXPECT_TRUE(json_nests_deeper(R"(["\\", [[]]])", 2));
}

TEST(OrderedJson, MatchesNlohmannsOrderedParse) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_text(rng, 1 + i % 6);
    const ordered_json want = ordered_json::parse(text);
    const ordered_json got = parse_ordered_json(text);
    // dump() writes keys in their order, so equal dumps mean equal keys, values and order.
    ASSERT_EQ(got.dump(), want.dump()) << "seed " << seed << ": " << text;
    ASSERT_EQ(got, want) << "seed " << seed << ": " << text;
    const json sorted = json::parse(text);
    ASSERT_EQ(to_ordered_json(sorted).dump(), ordered_json::parse(sorted.dump()).dump()) << "seed " << seed;
  }
}

TEST(OrderedJson, KeepsTheFirstPlaceAndTheLastValueOfARepeatedKey) {
  const ordered_json j = parse_ordered_json(R"({"b": 1, "a": {"y": 1, "x": 2, "y": 3}, "b": [2]})");
  EXPECT_EQ(j.dump(), R"({"b":[2],"a":{"y":3,"x":2}})");
}

TEST(OrderedJson, ErrorsAreNlohmanns) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "nul", "[1] 2", "\"\\x\""}) {
    EXPECT_THROW(parse_ordered_json(bad), nlohmann::json::parse_error) << bad;
  }
  EXPECT_THROW(parse_ordered_json("[1e400]"), nlohmann::json::out_of_range);
}

TEST(OrderedJson, NestingPastTheLimitIsFoundBeforeTheParse) {
  const auto nested = [](int n) { return std::string(n, '[') + "1" + std::string(n, ']'); };
  EXPECT_FALSE(json_nests_deeper(nested(64), 64));
  EXPECT_EQ(parse_ordered_json(nested(64)).flatten().size(), 1u);
  EXPECT_TRUE(json_nests_deeper(nested(65), 64));
  EXPECT_TRUE(json_nests_deeper("{\"a\":" + nested(64) + "}", 64));
  // No limit in the parse: 100,000 levels parse (the builder keeps its own stack, no recursion).
  const ordered_json deep = parse_ordered_json(nested(100000));
  const ordered_json* at = &deep;
  int levels = 0;
  for (; at->is_array() && at->size() == 1; at = &(*at)[0]) ++levels;
  EXPECT_EQ(levels, 100000);
  EXPECT_EQ(*at, 1);
}

TEST(OrderedJson, AnObjectOfManyKeysKeepsItsOrder) {
  std::mt19937 rng(std::random_device{}());
  std::string text = "{";
  std::vector<std::string> order;
  std::map<std::string, uint32_t> last;
  for (int i = 0; i < 100000; ++i) {
    const std::string key = "key" + std::to_string(rng() % 80000);
    const uint32_t value = rng();
    if (!last.count(key)) order.push_back(key);
    last[key] = value;
    text += std::string(i ? "," : "") + "\"" + key + "\":" + std::to_string(value);
  }
  const ordered_json j = parse_ordered_json(text + "}");
  ASSERT_EQ(j.size(), order.size());
  size_t i = 0;
  for (const auto& [key, value] : j.items()) {
    ASSERT_EQ(key, order[i]) << i;
    ASSERT_EQ(value.get<uint32_t>(), last[key]) << key;
    ++i;
  }
}
