// serve::parse_tool_calls: Hermes/Qwen <tool_call> blocks in generated text → OpenAI tool_calls.
#include "serve/tool_calls.h"

#include <gtest/gtest.h>

using onecat::serve::parse_tool_calls;

TEST(ToolCalls, TextWithoutCallsIsContent) {
  const auto p = parse_tool_calls("just words");
  EXPECT_EQ(p.content, "just words");
  EXPECT_TRUE(p.calls.empty());
}

TEST(ToolCalls, CallsWithAndWithoutLeadingText) {
  const auto p = parse_tool_calls(
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"now\"}</tool_call>");
  EXPECT_EQ(p.content, "Let me look.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(p.calls[1].name, "now");
  EXPECT_EQ(p.calls[1].arguments, "{}");

  const auto only = parse_tool_calls("\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_FALSE(only.content.has_value());
  ASSERT_EQ(only.calls.size(), 1u);
}

TEST(ToolCalls, UnclosedLastBlockStillParses) {
  const auto p = parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"x":1})");
}

TEST(ToolCalls, MalformedBlockLeavesPlainContent) {
  for (const std::string text : {"<tool_call>{\"name\": 5}</tool_call>", "<tool_call>not json</tool_call>",
                                 "a<tool_call>{\"name\": \"f\"}</tool_call><tool_call>[1]</tool_call>",
                                 "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>"}) {
    const auto p = parse_tool_calls(text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty()) << text;
  }
}

namespace {

struct Streamed {
  std::string content;
  std::vector<onecat::serve::ToolCall> calls;
};

// `text` through a ToolCallStream in pieces cut at `cuts` (ascending offsets).
Streamed stream_in_pieces(const std::string& text, const std::vector<size_t>& cuts) {
  onecat::serve::ToolCallStream s;
  Streamed out;
  size_t from = 0;
  auto take = [&](onecat::serve::ToolCallStream::Delta d) {
    out.content += d.content;
    for (auto& c : d.calls) out.calls.push_back(c);
  };
  for (size_t cut : cuts) {
    take(s.step(text.substr(from, cut - from)));
    from = cut;
  }
  take(s.step(text.substr(from)));
  take(s.finish());
  return out;
}

}  // namespace

// Streamed in any pieces (one character at a time, every two-way cut, every three-way cut of
// short texts), a reply gives the content and calls of parse_tool_calls on the whole text.
TEST(ToolCallStream, AnyPiecesGiveTheWholeTextsCallsAndContent) {
  for (const std::string& text :
       {std::string("just words, <tool and <tool_cal but no call"),
        std::string("Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                    "</tool_call>\n<tool_call>{\"name\": \"now\"}</tool_call>"),
        std::string("\n\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> trailing words"),
        std::string("<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}"), std::string("  \n "),
        std::string("a < b, <tool_call>{\"name\": \"g\"}</tool_call>x<tool_call>{\"name\": \"h\"}")}) {
    const auto whole = parse_tool_calls(text);
    auto check = [&](const std::vector<size_t>& cuts) {
      const Streamed s = stream_in_pieces(text, cuts);
      EXPECT_EQ(s.content, whole.content.value_or("")) << text;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << text;
      for (size_t i = 0; i < s.calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
      }
    };
    std::vector<size_t> every;
    for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
    check(every);
    for (size_t i = 0; i <= text.size(); ++i) check({i});
    if (text.size() < 64) {
      for (size_t i = 0; i <= text.size(); ++i) {
        for (size_t j = i; j <= text.size(); ++j) check({i, j});
      }
    }
  }
}

// Content is sent as soon as it cannot be the start of a tag; a call as soon as its block closes.
TEST(ToolCallStream, SendsContentEarlyAndHoldsOnlyWhatMayBeATag) {
  onecat::serve::ToolCallStream s;
  EXPECT_EQ(s.step("\n").content, "");  // whitespace may precede a call
  EXPECT_EQ(s.step("Hi <to").content, "\nHi ");
  EXPECT_EQ(s.step("ol").content, "");
  EXPECT_EQ(s.step("s> ok").content, "<tools> ok");
  auto d = s.step("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.calls.empty());
  d = s.step("call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"a":1})");
  EXPECT_TRUE(s.any_call());
  EXPECT_EQ(s.finish().content, "");
}

// A block that does not parse cannot take back the calls already sent: it is sent as content,
// tags and all; the calls before it stay calls.
TEST(ToolCallStream, AMalformedBlockIsSentAsContent) {
  const Streamed s = stream_in_pieces("<tool_call>{\"name\": \"f\"}</tool_call><tool_call>[1]</tool_call>", {5, 30});
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "f");
  EXPECT_EQ(s.content, "<tool_call>[1]</tool_call>");
  const Streamed unclosed = stream_in_pieces("<tool_call>{\"name\": ", {3});
  EXPECT_TRUE(unclosed.calls.empty());
  EXPECT_EQ(unclosed.content, "<tool_call>{\"name\": ");
}
