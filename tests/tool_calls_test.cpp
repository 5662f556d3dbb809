// serve::parse_tool_calls: Hermes/Qwen <tool_call> blocks in generated text → OpenAI tool_calls,
// also after the start of a forced call (tool_choice required or named).
#include "serve/tool_calls.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "serve/reasoning.h"
#include "test_util.h"

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

// Arguments keep the order the model wrote their keys in (vLLM's json.dumps of a parsed dict
// does), at every level.
TEST(ToolCalls, ArgumentsKeepTheModelsKeyOrder) {
  const auto p = parse_tool_calls(
      "<tool_call>{\"arguments\": {\"zeta\": 1, \"alpha\": {\"y\": [2], \"b\": 3}}, \"name\": \"f\"}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"zeta":1,"alpha":{"y":[2],"b":3}})");
  const auto mistral =
      onecat::serve::parse_tool_calls("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"zeta\": 1, \"alpha\": 2}}]",
                                      onecat::serve::ToolCallFormat::kMistral);
  ASSERT_EQ(mistral.calls.size(), 1u);
  EXPECT_EQ(mistral.calls[0].arguments, R"({"zeta":1,"alpha":2})");
}

TEST(ToolCalls, MalformedBlockLeavesPlainContent) {
  // Arguments nested 100,000 deep are content (dumping them again would recurse that deep).
  const std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}</tool_call>";
  EXPECT_EQ(parse_tool_calls(deep).content, deep);
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
Streamed stream_in_pieces(const std::string& text, const std::vector<size_t>& cuts,
                          onecat::serve::ToolCallFormat format = onecat::serve::ToolCallFormat::kHermes) {
  onecat::serve::ToolCallStream s(format);
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

// tool_choice "required" or a named function: the reply's start is forced at the end of the
// prompt, and the reply parsed is that start followed by the generated text.
TEST(ForcedToolCall, OpensABlockAndWritesANamedFunctionsName) {
  using onecat::serve::forced_tool_call;
  EXPECT_EQ(forced_tool_call(std::nullopt), "<tool_call>\n");
  EXPECT_EQ(forced_tool_call("get_weather"), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(forced_tool_call("say \"hi\"\\"), "<tool_call>\n{\"name\": \"say \\\"hi\\\"\\\\\", \"arguments\": ");
}

namespace {

// As the server streams a forced reply: the forced start through the stream first (with the
// role's chunk), then the generated text in pieces cut at `cuts`.
Streamed stream_after(const std::string& forced, const std::string& generated, const std::vector<size_t>& cuts) {
  onecat::serve::ToolCallStream s;
  Streamed out;
  auto take = [&](onecat::serve::ToolCallStream::Delta d) {
    out.content += d.content;
    for (auto& c : d.calls) out.calls.push_back(c);
  };
  take(s.step(forced));
  size_t from = 0;
  for (size_t cut : cuts) {
    take(s.step(generated.substr(from, cut - from)));
    from = cut;
  }
  take(s.step(generated.substr(from)));
  take(s.finish());
  return out;
}

}  // namespace

// Generated text that completes the forced call gives the call (its name from the forced start,
// its arguments generated); text that does not (max_tokens came first, invalid JSON) leaves the
// whole reply, forced start included, as content and no call. Streamed at every cut, the same.
TEST(ForcedToolCall, TheForcedStartAndTheGeneratedTextParseAsOneReply) {
  using onecat::serve::forced_tool_call;
  const std::string named = forced_tool_call("get_weather"), required = forced_tool_call(std::nullopt);
  struct Case {
    std::string forced, generated;
    std::vector<std::pair<std::string, std::string>> calls;  // (name, arguments); none: all content
  };
  const std::vector<Case> cases = {
      {named, "{\"city\": \"Paris\"}}", {{"get_weather", R"({"city":"Paris"})"}}},
      {named, "{\"city\": \"Paris\"}}\n</tool_call>", {{"get_weather", R"({"city":"Paris"})"}}},
      {named, "{}}\n", {{"get_weather", "{}"}}},
      {named, "{\"city\": \"Pa", {}},
      {named, "Paris}", {}},
      {named, "", {}},
      {required, "{\"name\": \"now\", \"arguments\": {}}", {{"now", "{}"}}},
      {required,
       "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Oslo\"}}\n</tool_call>",
       {{"now", "{}"}, {"get_weather", R"({"city":"Oslo"})"}}},
      {required, "I would rather not.", {}},
      {required, "{\"arguments\": {}}</tool_call>", {}},
  };
  for (const Case& c : cases) {
    const std::string reply = c.forced + c.generated;
    const auto whole = parse_tool_calls(reply);
    ASSERT_EQ(whole.calls.size(), c.calls.size()) << reply;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(whole.calls[i].name, c.calls[i].first) << reply;
      EXPECT_EQ(whole.calls[i].arguments, c.calls[i].second) << reply;
    }
    if (c.calls.empty()) {
      EXPECT_EQ(whole.content, reply);
    } else {
      EXPECT_FALSE(whole.content.has_value()) << reply;
    }
    auto check = [&](const std::vector<size_t>& cuts) {
      const Streamed s = stream_after(c.forced, c.generated, cuts);
      EXPECT_EQ(s.content, whole.content.value_or("")) << reply;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << reply;
      for (size_t i = 0; i < s.calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
      }
    };
    const size_t n = c.generated.size();
    std::vector<size_t> every;
    for (size_t i = 1; i < n; ++i) every.push_back(i);
    check(every);
    for (size_t i = 0; i <= n; ++i) {
      for (size_t j = i; j <= n; ++j) check({i, j});
    }
  }
}

// After a template that opened <think>, the forced start closes it first: the reasoning is
// empty and the call parses from the content.
TEST(ForcedToolCall, AfterAnOpenedThinkTheReasoningIsEmpty) {
  const std::string reply = "</think>\n\n" + onecat::serve::forced_tool_call("f") + "{\"x\": 1}}";
  const auto split = onecat::serve::ReasoningSplitter::split(reply, true);
  EXPECT_EQ(split.reasoning, "");
  const auto parsed = parse_tool_calls(split.content);
  EXPECT_FALSE(parsed.content.has_value());
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "f");
  EXPECT_EQ(parsed.calls[0].arguments, R"({"x":1})");
}

namespace {

struct CallCase {
  std::string text;
  std::vector<std::pair<std::string, std::string>> calls;  // (name, arguments); empty: all content
};

// Each case whole (its calls, or all of it as content) and streamed cut anywhere, in `format`.
void expect_calls(onecat::serve::ToolCallFormat format, const std::vector<CallCase>& cases) {
  for (const CallCase& c : cases) {
    const auto whole = parse_tool_calls(c.text, format);
    ASSERT_EQ(whole.calls.size(), c.calls.size()) << c.text;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(whole.calls[i].name, c.calls[i].first) << c.text;
      EXPECT_EQ(whole.calls[i].arguments, c.calls[i].second) << c.text;
    }
    EXPECT_EQ(whole.content, c.calls.empty() ? std::optional<std::string>(c.text) : std::nullopt) << c.text;
    auto check = [&](const std::vector<size_t>& cuts) {
      const Streamed s = stream_in_pieces(c.text, cuts, format);
      EXPECT_EQ(s.content, whole.content.value_or("")) << c.text;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << c.text;
      for (size_t i = 0; i < s.calls.size(); ++i) EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
    };
    std::vector<size_t> every;
    for (size_t i = 1; i < c.text.size(); ++i) every.push_back(i);
    check(every);
    for (size_t i = 0; i <= c.text.size(); ++i) check({i});
  }
}

}  // namespace

// llama3_json: the whole reply is the calls, {"name", "parameters" (or "arguments")} objects joined by
// ";" after an optional <|python_tag|>; anything else, or calls that do not parse throughout,
// is content. Streamed in any pieces it gives what the whole text gives.
TEST(ToolCalls, Llama3JsonRepliesAreCallsThroughoutOrContent) {
  using onecat::serve::ToolCallFormat;
  const ToolCallFormat llama = ToolCallFormat::kLlama3Json;
  expect_calls(llama, {
                          {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                           {{"get_weather", "{\"city\":\"Paris\"}"}}},
                          {"  \n<|python_tag|>{\"name\": \"f\", \"arguments\": {\"s\": \"a } ; { b\\\" c\"}}",
                           {{"f", "{\"s\":\"a } ; { b\\\" c\"}"}}},
                          {"{\"name\": \"f\", \"parameters\": {\"x\": [1, {\"y\": 2}]}}; {\"name\": \"g\"};",
                           {{"f", "{\"x\":[1,{\"y\":2}]}"}, {"g", "{}"}}},
                          {"The weather in Paris is mild.", {}},
                          {"Sure: {\"name\": \"f\", \"parameters\": {}}", {}},
                          {"{\"name\": \"f\", \"parameters\": {}} and then words", {}},
                          {"{\"name\": \"f\", \"parameters\": {\"x\": 1}", {}},  // never closes
                          {"{\"function\": \"f\"}", {}},
                          {"{\"name\": \"f\"}; {\"oops\": 1}", {}},
                          {"<|python_", {}},
                          {" \n ", {}},
                      });
  // Content streams at once; text that may be calls waits for the end.
  onecat::serve::ToolCallStream s(llama);
  EXPECT_EQ(s.step(" The").content, " The");
  EXPECT_EQ(s.step(" answer").content, " answer");
  onecat::serve::ToolCallStream calls(llama);
  EXPECT_EQ(calls.step("\n{\"name\": \"f\"").content, "");
  EXPECT_EQ(calls.step("}").content, "");
  const auto end = calls.finish();
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].name, "f");
  EXPECT_TRUE(calls.any_call());

  // A forced call's start, and the format's name.
  EXPECT_EQ(onecat::serve::forced_tool_call("say \"hi\"", llama), "{\"name\": \"say \\\"hi\\\"\", \"parameters\": ");
  EXPECT_EQ(onecat::serve::forced_tool_call(std::nullopt, llama), "");
  EXPECT_EQ(onecat::serve::parse_tool_call_format("llama3_json"), llama);
  onecat::test::expect_throw<onecat::InputError>(
      [] { onecat::serve::parse_tool_call_format("pythonic"); },
      {"--tool-call-parser", "hermes", "llama3_json", "mistral", "pythonic"});
}

// mistral: [TOOL_CALLS] (usually skipped from the text: a special token) and a JSON array of
// {"name", "arguments"}; anything else is content. Streamed in any pieces as whole.
TEST(ToolCalls, MistralRepliesAreACallArrayOrContent) {
  const auto mistral = onecat::serve::ToolCallFormat::kMistral;
  expect_calls(mistral, {
                            {"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
                             {{"get_weather", "{\"city\":\"Paris\"}"}}},
                            {" [{\"name\": \"f\", \"arguments\": {\"s\": \"] [\"}}, {\"name\": \"g\"}]\n",
                             {{"f", "{\"s\":\"] [\"}"}, {"g", "{}"}}},
                            {"Paris is sunny.", {}},
                            {"[1, 2, 3]", {}},
                            {"[]", {}},
                            {"[{\"name\": \"f\"}] and more", {}},
                            {"[{\"name\": \"f\"}", {}},
                            {"[TOOL_", {}},
                        });
  EXPECT_EQ(onecat::serve::forced_tool_call("f", mistral), "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": ");
  EXPECT_EQ(onecat::serve::forced_tool_call(std::nullopt, mistral), "[TOOL_CALLS][");
  EXPECT_EQ(onecat::serve::forced_call_suffix(mistral, true), "}]");
  EXPECT_EQ(onecat::serve::forced_call_suffix(mistral, false), "]");
  // A forced named call and the generated rest parse as one reply.
  EXPECT_EQ(parse_tool_calls(onecat::serve::forced_tool_call("f", mistral) + "{\"x\": 1}}]", mistral).calls.size(), 1u);
}
