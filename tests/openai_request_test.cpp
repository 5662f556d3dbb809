// serve::parse_chat's tool_choice: "auto" and "none" as before; "required" and a named function
// force the start of the reply at the end of the prompt; every other shape is a 400 naming
// tool_choice. On a byte-level tokenizer (every byte a token) and the tiny checkpoint's template.
#include "serve/openai_request.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/chat/ordered_json.h"
#include "serve/tool_calls.h"
#include "test_util.h"

using nlohmann::json;
using onecat::serve::ApiError;
using onecat::serve::Generation;
using onecat::serve::ServedModel;

namespace {

using onecat::test::byte_char;

// tools/make_tiny_checkpoint.py's CHAT_TEMPLATE: tools listed by name, earlier calls in
// Hermes's form, and open_think (the generation prompt ends with <think>).
constexpr const char* kTemplate =
    "{% if tools %}<|tools|>{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{% if m.content %}{{ m.content }}{% endif %}"
    "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% if open_think %}<think>{% endif %}{% endif %}";

ServedModel served(bool reasoning = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const json tokenizer{{"added_tokens", json::array()},
                       {"normalizer", nullptr},
                       {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                       {"post_processor", nullptr},
                       {"decoder", {{"type", "ByteLevel"}}},
                       {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
  ServedModel m{.name = "tiny",
                .max_model_len = 4096,
                .vocab = 256,
                .tokenizer = onecat::tokenizer::Tokenizer::from_hf_json(tokenizer.dump())};
  m.chat_template.emplace(kTemplate);
  m.tool_template.emplace(kTemplate);
  m.reasoning = reasoning;
  return m;
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
  {"type": "function", "function": {"name": "say \"hi\""}}])");

json body(json tool_choice, json extra = json::object()) {
  json b{{"messages", {{{"role", "user"}, {"content", "weather?"}}}}, {"tools", kTools}, {"max_tokens", 8}};
  if (!tool_choice.is_null()) b["tool_choice"] = std::move(tool_choice);
  b.update(extra);
  return b;
}

json named(const std::string& name) { return {{"type", "function"}, {"function", {{"name", name}}}}; }

std::string prompt_text(const ServedModel& m, const Generation& g) { return m.tokenizer.decode(g.prompts.at(0)); }

// A 400 on tool_choice whose message holds `words`.
void expect_refused(const ServedModel& m, const json& b, const std::string& words) {
  try {
    onecat::serve::parse_chat(b, m, 1);
    ADD_FAILURE() << "accepted: " << b.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << b.dump();
    EXPECT_EQ(e.param, "tool_choice") << b.dump();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ToolChoice, AutoAndNoneForceNothing) {
  const ServedModel m = served();
  for (const json& choice : {json(), json("auto")}) {
    const Generation g = onecat::serve::parse_chat(body(choice), m, 1);
    EXPECT_TRUE(g.tool_calls);
    EXPECT_EQ(g.forced_reply, "");
    EXPECT_EQ(prompt_text(m, g), "<|tools|>get_weather;say \"hi\";<|user|>weather?<|assistant|>");
    EXPECT_TRUE(g.stop.empty());
  }
  const Generation none = onecat::serve::parse_chat(body("none"), m, 1);
  EXPECT_FALSE(none.tool_calls);
  EXPECT_EQ(none.forced_reply, "");
  EXPECT_EQ(prompt_text(m, none), "<|user|>weather?<|assistant|>");
}

// A named function: the prompt ends with its call opened and its name written (as a JSON
// string), and the reply ends when the block closes; /tokenize's rendering is the same prompt.
TEST(ToolChoice, ANamedFunctionIsForcedAfterTheTemplate) {
  const ServedModel m = served();
  const std::string rendered = "<|tools|>get_weather;say \"hi\";<|user|>weather?<|assistant|>";
  Generation g = onecat::serve::parse_chat(body(named("get_weather")), m, 1);
  EXPECT_TRUE(g.tool_calls);
  EXPECT_EQ(g.forced_reply, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(prompt_text(m, g), rendered + g.forced_reply);
  EXPECT_EQ(onecat::serve::render_chat(body(named("get_weather")), m), rendered + g.forced_reply);
  EXPECT_EQ(g.stop, std::vector<std::string>{"</tool_call>"});
  // The request's own stop strings stay.
  g = onecat::serve::parse_chat(body(named("get_weather"), {{"stop", "END"}}), m, 1);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"END", "</tool_call>"}));
  g = onecat::serve::parse_chat(body(named("say \"hi\"")), m, 1);
  EXPECT_EQ(g.forced_reply, "<tool_call>\n{\"name\": \"say \\\"hi\\\"\", \"arguments\": ");
}

// "required": a call opened, any function's; the model may make several.
TEST(ToolChoice, RequiredOpensACall) {
  const ServedModel m = served();
  const Generation g = onecat::serve::parse_chat(body("required"), m, 1);
  EXPECT_TRUE(g.tool_calls);
  EXPECT_EQ(g.forced_reply, "<tool_call>\n");
  EXPECT_EQ(prompt_text(m, g), "<|tools|>get_weather;say \"hi\";<|user|>weather?<|assistant|><tool_call>\n");
  EXPECT_TRUE(g.stop.empty());
}

// A template that opens <think> has it closed, empty, before the forced call; with a reasoning
// parser the reply still starts inside it (the forced start closes it).
TEST(ToolChoice, AnOpenedThinkIsClosedBeforeTheForcedCall) {
  const ServedModel m = served(true);
  const json kwargs{{"chat_template_kwargs", {{"open_think", true}}}};
  const Generation g = onecat::serve::parse_chat(body("required", kwargs), m, 1);
  EXPECT_EQ(g.forced_reply, "</think>\n\n<tool_call>\n");
  EXPECT_TRUE(g.reasoning_opened);
  EXPECT_EQ(prompt_text(m, g),
            "<|tools|>get_weather;say \"hi\";<|user|>weather?<|assistant|><think></think>\n\n"
            "<tool_call>\n");
  const Generation open = onecat::serve::parse_chat(body("auto", kwargs), m, 1);
  EXPECT_EQ(open.forced_reply, "");
  EXPECT_TRUE(open.reasoning_opened);
}

TEST(ToolChoice, OtherShapesAndUnknownNamesAreRefused) {
  const ServedModel m = served();
  const std::string shapes = "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\"";
  for (const json& choice :
       {json("any"), json(""), json(5), json(true), json::array(), json::object(), json{{"type", "function"}},
        json{{"type", "function"}, {"function", json::object()}}, json{{"type", "function"}, {"function", "f"}},
        json{{"type", "function"}, {"function", {{"name", 5}}}},
        json{{"type", "code"}, {"function", {{"name", "get_weather"}}}}, json{{"function", {{"name", "get_weather"}}}},
        json{{"type", "function"}, {"name", "get_weather"}}}) {
    expect_refused(m, body(choice), shapes);
  }
  expect_refused(m, body(named("get_time")), "names the function 'get_time', which is not among tools.");
  expect_refused(m, body(named("Get_Weather")), "not among tools");
  json no_tools = body("required");
  no_tools.erase("tools");
  expect_refused(m, no_tools, "tool_choice is \"required\" but the request has no tools.");
  no_tools["tools"] = json::array();
  expect_refused(m, no_tools, "has no tools");
  no_tools["tool_choice"] = named("get_weather");
  expect_refused(m, no_tools, "names the function 'get_weather' but the request has no tools.");
  expect_refused(m, body(named("get_weather"), {{"add_generation_prompt", false}}), "needs add_generation_prompt");
  // auto and none need no tools, as before.
  json plain = body("none");
  plain.erase("tools");
  EXPECT_FALSE(onecat::serve::parse_chat(plain, m, 1).tool_calls);
  plain["tool_choice"] = "auto";
  EXPECT_FALSE(onecat::serve::parse_chat(plain, m, 1).tool_calls);
}

// ---------------------------------------------------------------------------------------------
// Structured outputs: the grammar each request form makes, and the requests refused.
namespace {

ServedModel served_with_grammars() {
  ServedModel m = served();
  std::vector<std::string> bytes = m.tokenizer.token_bytes();
  m.grammars = std::make_shared<onecat::engine::GrammarCache>(
      std::make_shared<const onecat::engine::TokenVocabulary>(bytes, m.vocab));
  return m;
}

bool grammar_matches(const Generation& g, const std::string& text) {
  onecat::engine::GrammarAutomaton& a = *g.grammar;
  const int32_t s = a.step(a.start(), text);
  return s != onecat::engine::GrammarAutomaton::kDead && a.accepting(s);
}

// Parsed as the server does: the body, and the same text with its key order.
Generation chat_of(const ServedModel& m, const std::string& text) {
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  return onecat::serve::parse_chat(json::parse(text), m, 1, &ordered);
}

TEST(StructuredOutputs, EachRequestFormMakesItsGrammar) {
  const ServedModel m = served_with_grammars();
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_FALSE(chat_of(m, "{" + messages + R"(, "response_format": {"type": "text"}})").grammar);
  Generation g = chat_of(m, "{" + messages + R"(, "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(g.grammar);
  EXPECT_TRUE(grammar_matches(g, R"({"a": [1, "x"]})"));
  EXPECT_FALSE(grammar_matches(g, "[1]"));
  EXPECT_TRUE(g.gated);
  // The properties in the order sent (z before a), not sorted.
  g = chat_of(m, "{" + messages + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "strict": true, "schema": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "boolean"}},
      "required": ["z", "a"]}}}})");
  ASSERT_TRUE(g.grammar);
  EXPECT_TRUE(grammar_matches(g, R"({"z": 1, "a": true})"));
  EXPECT_FALSE(grammar_matches(g, R"({"a": true, "z": 1})"));
  // The same schema again: the same automaton (its masks reused).
  Generation again =
      chat_of(m, "{" + messages + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "strict": true, "schema": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "boolean"}},
      "required": ["z", "a"]}}}})");
  EXPECT_EQ(again.grammar, g.grammar);
  g = chat_of(m, "{" + messages + R"(, "guided_json": "{\"type\": \"array\", \"items\": {\"type\": \"null\"}}"})");
  EXPECT_TRUE(grammar_matches(g, "[null, null]"));
  g = chat_of(m, "{" + messages + R"(, "guided_regex": "[0-9]{3}-[a-z]+"})");
  EXPECT_TRUE(grammar_matches(g, "123-abc"));
  EXPECT_FALSE(grammar_matches(g, "12-abc"));
  // vLLM's newer form.
  g = chat_of(m,
              "{" + messages +
                  R"(, "structured_outputs": {"json": {"type": "array", "maxItems": 1}, "disable_fallback": true}})");
  EXPECT_TRUE(grammar_matches(g, "[1]"));
  EXPECT_FALSE(grammar_matches(g, "[1, 2]"));
  g = chat_of(m, "{" + messages + R"(, "structured_outputs": {"json_object": true}})");
  EXPECT_TRUE(grammar_matches(g, "{}"));
  g = chat_of(m, "{" + messages + R"(, "structured_outputs": {"choice": ["a", "b"]}})");
  EXPECT_TRUE(grammar_matches(g, "b"));
  g = chat_of(m, "{" + messages + R"(, "structured_outputs": {"regex": "x+"}})");
  EXPECT_TRUE(grammar_matches(g, "xxx"));
  EXPECT_FALSE(chat_of(m, "{" + messages + R"(, "structured_outputs": {"json_object": false}})").grammar);
  g = chat_of(m, "{" + messages + R"(, "guided_choice": ["yes", "no"]})");
  EXPECT_TRUE(grammar_matches(g, "no"));
  EXPECT_FALSE(grammar_matches(g, "maybe"));
  const nlohmann::ordered_json completion =
      nlohmann::ordered_json::parse(R"({"prompt": "x", "response_format": {"type": "json_object"}})");
  g = onecat::serve::parse_completion(json::parse(completion.dump()), m, 1, &completion);
  EXPECT_TRUE(g.grammar);
  EXPECT_FALSE(g.gated);  // a completion is not a chat reply: no reasoning first
}

// A chat with two tools, one with typed parameters (city: string, required) and one without.
json typed_tools_chat() {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "noop"}}])");
  return {{"messages", {{{"role", "user"}, {"content", "weather?"}}}}, {"tools", tools}};
}

TEST(StructuredOutputs, ForcedToolCallsFollowTheParameters) {
  const ServedModel m = served_with_grammars();
  json b = typed_tools_chat();
  b["tool_choice"] = named("get_weather");
  Generation g = chat_of(m, b.dump());
  ASSERT_TRUE(g.grammar);
  EXPECT_FALSE(g.gated);
  EXPECT_TRUE(grammar_matches(g, R"({"city": "Paris"}})"));
  EXPECT_FALSE(grammar_matches(g, R"({"town": "Paris"}})"));
  EXPECT_FALSE(grammar_matches(g, R"({"city": "Paris"})"));  // the call's own "}" follows
  b["tool_choice"] = "required";
  g = chat_of(m, b.dump());
  ASSERT_TRUE(g.grammar);
  EXPECT_TRUE(grammar_matches(g, R"({"name": "get_weather", "arguments": {"city": "x"}})"));
  EXPECT_TRUE(grammar_matches(g, R"({"name": "noop", "arguments": {}})"));
  EXPECT_FALSE(grammar_matches(g, R"({"name": "other", "arguments": {}})"));
  b["tool_choice"] = "auto";
  EXPECT_FALSE(chat_of(m, b.dump()).grammar);
}

TEST(StructuredOutputs, BadRequestsAreRefused) {
  const ServedModel m = served_with_grammars();
  const std::string messages = R"({"messages": [{"role": "user", "content": "hi"}], )";
  struct Case {
    std::string body, says;
  };
  const std::vector<Case> cases{
      {R"("response_format": {"type": "xml"}})", "must be text, json_object or json_schema, not 'xml'"},
      {R"("response_format": {"type": "json_schema"}})", "needs a json_schema object"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "not": {}}}}})",
       "response_format.json_schema.schema: the JSON schema root uses \"not\", which onecat cannot enforce yet."},
      {R"("response_format": {"type": "json_object"}, "guided_choice": ["a"]})",
       "one of response_format, guided_json, guided_regex, guided_choice and structured_outputs"},
      {R"("guided_json": {"type": "object"}, "structured_outputs": {"regex": "a"}})", "give one of"},
      {R"("structured_outputs": {"grammar": "root ::= x"}})", "structured_outputs.grammar is not supported"},
      {R"("structured_outputs": 3})", "structured_outputs must be an object"},
      {R"x("structured_outputs": {"regex": "(?=a)"}})x", "structured_outputs.regex: the regular expression"},
      {R"("guided_choice": []})", "non-empty array of strings"},
      {R"("guided_choice": ["a", ""]})", "non-empty strings"},
      {R"("guided_json": "{not json"})", "guided_json must be a JSON schema"},
      {R"("guided_json": {"type": "object", "properties": {"d": {"format": "ipv6"}}}})",
       "at #/properties/d has format 'ipv6'"},
      {R"("guided_regex": "(a)\\1"})", "guided_regex: the regular expression '(a)\\1' has a backreference"},
      {R"("guided_regex": 5})", "guided_regex must be a string"},
      {R"("response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}]})",
       "with tools is not supported"},
  };
  for (const Case& c : cases) {
    try {
      chat_of(m, messages + c.body);
      ADD_FAILURE() << "accepted " << c.body;
    } catch (const onecat::serve::ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
  // JSON text inside a string, and patterns, nest no deeper than a body may (100 000 levels
  // overflowed the stack: a crash of the server); a $ref loop is the request's mistake (was a 500).
  const std::string deep_schema = std::string(100000, '[') + std::string(100000, ']');
  const std::string deep_pattern = std::string(100000, '(') + "a" + std::string(100000, ')');
  const std::vector<Case> deep{
      {R"("guided_json": ")" + deep_schema + "\"}", "guided_json nests deeper than 64 levels."},
      {R"("structured_outputs": {"json": ")" + deep_schema + "\"}}", "nests deeper than 64 levels."},
      {R"("guided_regex": ")" + deep_pattern + "\"}", "nests more than 100 levels deep"},
      {R"("guided_json": {"$ref": "#"}})", "guided_json: the grammar reaches a rule inside itself"},
  };
  for (const Case& c : deep) {
    try {
      chat_of(m, messages + c.body);
      ADD_FAILURE() << "accepted " << c.body.substr(0, 80);
    } catch (const onecat::serve::ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << std::string(e.what()).substr(0, 300);
    }
  }
  try {
    const json calls{{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep_schema}}}}};
    onecat::serve::parse_chat({{"messages",
                                {{{"role", "user"}, {"content", "hi"}},
                                 {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}}}}},
                              m, 1);
    ADD_FAILURE() << "accepted deeply nested tool call arguments";
  } catch (const onecat::serve::ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("messages[1].tool_calls[0].function.arguments nests deeper than 64 levels."),
              std::string::npos)
        << e.what();
  }
  // A server without structured outputs says so.
  try {
    onecat::serve::parse_chat(json::parse(messages + R"("response_format": {"type": "json_object"}})"), served(), 1);
    ADD_FAILURE() << "accepted";
  } catch (const onecat::serve::ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("no structured outputs"), std::string::npos) << e.what();
  }
}

}  // namespace

// Requests take the checkpoint's recommended sampling (generation_config.json, vLLM's
// --generation-config auto) for the fields they leave out, and their own where given.
TEST(SamplingDefaults, FillWhatARequestLeavesOut) {
  onecat::test::TempDir dir;
  auto write = [&](const std::string& text) { onecat::test::write_file(dir / "generation_config.json", text); };
  write(R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "eos_token_id": [1, 2]})");
  ServedModel m = served();
  m.sampling_defaults = onecat::model::sampling_defaults(dir.path());
  EXPECT_EQ(m.sampling_defaults.describe(), "temperature 0.6, top_k 20, top_p 0.95");
  json chat = body(nullptr);
  chat.erase("tools");
  Generation g = onecat::serve::parse_chat(chat, m, 1);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.6f);
  EXPECT_EQ(g.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.95f);
  EXPECT_FLOAT_EQ(g.sampling.min_p, 0.0f);
  EXPECT_FLOAT_EQ(g.sampling.repetition_penalty, 1.0f);
  chat.update(json{{"temperature", 0}, {"top_k", -1}, {"top_p", 1}});
  g = onecat::serve::parse_chat(chat, m, 1);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.sampling.top_k, -1);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 1.0f);
  g = onecat::serve::parse_completion(json{{"prompt", "hi"}}, m, 1);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.6f);
  EXPECT_EQ(g.max_tokens, 16);  // completions keep the API's default length

  // transformers' own defaults are no recommendation (vLLM reads the diff); max_new_tokens is
  // chat's default max_tokens; "vllm" and no file leave everything to the API.
  write(R"({"temperature": 1.0, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.1, "max_new_tokens": 99})");
  m.sampling_defaults = onecat::model::sampling_defaults(dir.path());
  EXPECT_EQ(m.sampling_defaults.describe(), "repetition_penalty 1.1, max_tokens 99");
  chat.erase("max_tokens");
  EXPECT_EQ(onecat::serve::parse_chat(chat, m, 1).max_tokens, 99);
  EXPECT_TRUE(onecat::model::sampling_defaults(dir.path(), "vllm").empty());
  onecat::test::TempDir empty;
  EXPECT_TRUE(onecat::model::sampling_defaults(empty.path()).empty());
  EXPECT_FALSE(onecat::model::sampling_defaults(empty.path(), dir.path()).empty());

  // --override-generation-config goes over them, values as given.
  onecat::model::SamplingDefaults d = onecat::model::sampling_defaults(dir.path());
  onecat::model::override_sampling_defaults(d, R"({"temperature": 1.0, "max_new_tokens": 7, "min_p": 0.05})");
  EXPECT_EQ(d.describe(), "temperature 1, min_p 0.05, repetition_penalty 1.1, max_tokens 7");
}

TEST(SamplingDefaults, BadFilesAndOverridesAreNamed) {
  onecat::test::TempDir dir;
  const std::string file = dir / "generation_config.json";
  for (const auto& [text, words] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"{nope", {file, "not a JSON object"}},
           {"[1]", {file, "not a JSON object"}},
           {R"({"temperature": "hot"})", {file, "\"temperature\"", "a number"}},
           {R"({"temperature": -1})", {file, "\"temperature\"", "≥ 0"}},
           {R"({"top_p": 0})", {file, "\"top_p\"", "(0, 1]"}},
           {R"({"top_k": 2.5})", {file, "\"top_k\"", "integer"}},
           {R"({"max_new_tokens": 0})", {file, "\"max_new_tokens\"", "≥ 1"}},
           {R"({"repetition_penalty": 0})", {file, "\"repetition_penalty\"", "> 0"}}}) {
    onecat::test::write_file(file, text);
    try {
      onecat::model::sampling_defaults(dir.path());
      ADD_FAILURE() << "accepted " << text;
    } catch (const onecat::InputError& e) {
      for (const std::string& w : words) EXPECT_TRUE(onecat::test::contains(e.what(), w)) << e.what();
    }
  }
  onecat::test::expect_throw<onecat::InputError>([&] { onecat::model::sampling_defaults(dir.path(), dir / "nowhere"); },
                                                 {"--generation-config", "nowhere", "auto, vllm or a directory"});
  onecat::model::SamplingDefaults d;
  onecat::test::expect_throw<onecat::InputError>([&] { onecat::model::override_sampling_defaults(d, "0.5"); },
                                                 {"--override-generation-config", "JSON object"});
  onecat::test::expect_throw<onecat::InputError>(
      [&] { onecat::model::override_sampling_defaults(d, R"({"temprature": 0.5})"); }, {"temprature", "not one of"});
  onecat::test::expect_throw<onecat::InputError>(
      [&] { onecat::model::override_sampling_defaults(d, R"({"top_p": 2})"); },
      {"--override-generation-config", "top_p"});
}

// --tool-call-parser llama3_json and mistral: a forced call is written in the format's own shape
// (a named function's start forced, "required" all of it under the grammar), the grammar closing
// it; no closing tag to stop at.
TEST(ToolChoice, JsonFormatsForceTheirOwnCallShape) {
  struct Format {
    onecat::serve::ToolCallFormat format;
    const char *named, *required;  // the forced starts
    const char *args, *args_bad;   // a named call's rest, and one the grammar refuses
    const char *call, *call_bad;   // a required call's rest, and one refused
  };
  using onecat::serve::ToolCallFormat;
  for (const Format& f :
       {Format{ToolCallFormat::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": ", "", R"({"city": "Paris"}})",
               R"({"town": "Paris"}})", R"({"name": "get_weather", "parameters": {"city": "x"}})",
               R"({"name": "get_weather", "arguments": {"city": "x"}})"},
        Format{ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": ", "[TOOL_CALLS][",
               R"({"city": "Paris"}}])", R"({"city": "Paris"}})", R"({"name": "noop", "arguments": {}}])",
               R"({"name": "noop", "arguments": {}})"}}) {
    ServedModel m = served_with_grammars();
    m.tool_format = f.format;
    json b = typed_tools_chat();
    b["tool_choice"] = named("get_weather");
    Generation g = chat_of(m, b.dump());
    EXPECT_EQ(g.forced_reply, f.named);
    EXPECT_TRUE(g.stop.empty());
    ASSERT_TRUE(g.grammar);
    EXPECT_TRUE(grammar_matches(g, f.args)) << f.args;
    EXPECT_FALSE(grammar_matches(g, f.args_bad)) << f.args_bad;
    // The forced start and a completed rest parse as the call.
    EXPECT_EQ(onecat::serve::parse_tool_calls(g.forced_reply + f.args, f.format).calls.size(), 1u);
    b["tool_choice"] = "required";
    g = chat_of(m, b.dump());
    EXPECT_EQ(g.forced_reply, f.required);
    ASSERT_TRUE(g.grammar);
    EXPECT_TRUE(grammar_matches(g, f.call)) << f.call;
    EXPECT_FALSE(grammar_matches(g, f.call_bad)) << f.call_bad;
  }
}

TEST(RequestRanges, RefusalsNameTheRangeAsWritten) {
  // Numbers as a person writes them ([0, 2], not [0.000000, 2.000000]); an integer bounded only by
  // its type says "at least" (not "in [1, 9223372036854775807]").
  const ServedModel m = served();
  struct Case {
    json extra;
    std::string param, says;
  };
  const std::vector<Case> cases{
      {{{"temperature", -1}}, "temperature", "temperature must be in [0, 2], got -1."},
      {{{"presence_penalty", 2.5}}, "presence_penalty", "presence_penalty must be in [-2, 2], got 2.5."},
      {{{"max_tokens", -1}}, "max_tokens", "max_tokens must be at least 1, got -1."},
  };
  for (const Case& c : cases) {
    json b = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
    b.update(c.extra);
    try {
      onecat::serve::parse_chat(b, m, 1);
      ADD_FAILURE() << "accepted: " << b.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << b.dump();
      EXPECT_EQ(e.param, c.param) << b.dump();
      EXPECT_EQ(std::string(e.what()), c.says) << b.dump();
    }
  }
}

// Tools, earlier calls' arguments and chat_template_kwargs reach the template with their keys in
// the order the client wrote them, as transformers renders a request's Python dicts (sorted keys
// changed Qwen's tool prompt), also for objects of many keys; without the ordered body, sorted.
TEST(ChatOrder, TheTemplateSeesKeysInTheOrderSent) {
  ServedModel m = served();
  const std::string tmpl =
      "{{ tools | tojson }}|{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}"
      "{% endfor %}{% endfor %}|{{ extra | tojson }}";
  m.chat_template.emplace(tmpl);
  m.tool_template.emplace(tmpl);
  m.max_model_len = 1 << 20;  // the prompt holds 30,000 kwargs
  std::string many = "{";
  for (int i = 30000; i > 0; --i) many += "\"p" + std::to_string(i) + "\": " + std::to_string(i) + (i > 1 ? ", " : "}");
  const std::string text = R"({"messages": [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
       "function": {"name": "f", "arguments": {"zeta": 1, "alpha": {"y": 2, "b": 3}}}}]}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"zcity": {"type": "string"}, "aunit": {}}}}}],
    "chat_template_kwargs": {"extra": )" +
                           many + "}}";
  const json body = json::parse(text);
  const nlohmann::ordered_json ordered = onecat::chat::parse_ordered_json(text);
  const std::string sent_tools =
      R"([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", )"
      R"("properties": {"zcity": {"type": "string"}, "aunit": {}}}}}])";
  const std::string sent_args = R"({"zeta": 1, "alpha": {"y": 2, "b": 3}})";
  const std::string rendered = onecat::serve::render_chat(body, m, &ordered);
  EXPECT_EQ(rendered.substr(0, sent_tools.size() + 1 + sent_args.size() + 1), sent_tools + "|" + sent_args + "|");
  EXPECT_EQ(rendered.substr(rendered.rfind('|') + 1, 20), R"({"p30000": 30000, "p)");
  const Generation g = onecat::serve::parse_chat(body, m, 1, &ordered);
  EXPECT_EQ(prompt_text(m, g), rendered);
  // Without the ordered body (the Python module's and older callers' form): sorted, as json is.
  const std::string sorted = onecat::serve::render_chat(body, m);
  EXPECT_EQ(sorted.substr(0, 41), R"([{"function": {"description": "d", "name")");
  EXPECT_NE(sorted.find(R"({"alpha": {"b": 3, "y": 2}, "zeta": 1})"), std::string::npos) << sorted.substr(0, 300);
}

// logit_bias over a large vocabulary: every id of 150,000 biased once is taken (its duplicate
// check was a scan of the ids before it: 150,000²/2 comparisons), and an id written twice, as
// "7" and "07", is refused by name.
TEST(RequestRanges, LogitBiasOverAWholeVocabulary) {
  ServedModel m = served();
  m.vocab = 151936;
  json b{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}};
  json& lb = b["logit_bias"] = json::object();
  for (int id = 0; id < 150000; ++id) lb[std::to_string(id)] = (id % 201) - 100;
  const Generation g = onecat::serve::parse_chat(b, m, 1);
  ASSERT_EQ(g.sampling.logit_bias.size(), 150000u);
  for (const auto& [id, bias] : g.sampling.logit_bias) EXPECT_EQ(bias, float((id % 201) - 100)) << id;
  lb["07"] = 1;
  try {
    onecat::serve::parse_chat(b, m, 1);
    ADD_FAILURE() << "accepted token 7 twice";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "logit_bias");
    EXPECT_NE(std::string(e.what()).find("names token 7 twice"), std::string::npos) << e.what();
  }
}
