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
