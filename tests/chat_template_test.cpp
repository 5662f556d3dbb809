// The chat-template engine, construct by construct (expected strings are what jinja2 prints;
// python/tests/test_chat_template_jinja.py checks the same and more against jinja2 itself).
#include "models/chat/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

using onecat::chat::ChatRequest;
using onecat::chat::ChatTemplate;
using onecat::chat::TemplateError;
using json = nlohmann::ordered_json;

std::string render(const std::string& source, const json& vars = json::object()) {
  return ChatTemplate(source).render(vars);
}

// The error a template raises (parsing or rendering), or "" when it renders.
TemplateError error_of(const std::string& source, const json& vars = json::object()) {
  try {
    render(source, vars);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error from: " << source;
  return TemplateError(0, "");
}

TEST(ChatTemplateText, NewlinesAreNormalisedAndTheLastOneDropped) {
  EXPECT_EQ(render("hello"), "hello");
  EXPECT_EQ(render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(ChatTemplatePrint, ValuesPrintAsPythonStr) {
  EXPECT_EQ(render("{{ none }} {{ true }} {{ 1.0 }} {{ 1e16 }} {{ 1e-05 }} {{ 0.1 + 0.2 }}"),
            "None True 1.0 1e+16 1e-05 0.30000000000000004");
  EXPECT_EQ(render("{{ [1, 'a', none, {'k': \"it's\"}] }}"), "[1, 'a', None, {'k': \"it's\"}]");
  EXPECT_EQ(render("{{ (1,) }}{{ ('a\\nb', 2) }}"), "(1,)('a\\nb', 2)");
  EXPECT_EQ(render("{{ missing }}|{{ 'x' ~ missing }}"), "|x");
  EXPECT_EQ(render("{{ range(3) }}{{ range(1, 9, 2) | list }}{{ range(3) == [0, 1, 2] }}"),
            "range(0, 3)[1, 3, 5, 7]False");
}

TEST(ChatTemplateWhitespace, TrimBlocksAndLstripBlocksAsTransformersSetsThem) {
  EXPECT_EQ(render("  {% if true %}\n  yes\n  {% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render("a\n  {%+ if true %}x{% endif +%}\nb"), "a\n  x\nb");
  EXPECT_EQ(render("a {# comment #}\nb\n  {# own line #}\nc"), "a b\nc");
  EXPECT_EQ(render("{{ 1 }}\n{{ 2 }}"), "1\n2");  // no trim after print tags
}

TEST(ChatTemplateLoops, LoopVariablesElseFilterAndUnpacking) {
  EXPECT_EQ(
      render(
          "{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }};{% endfor %}"),
      "12TrueFalse;21FalseFalse;30FalseTrue;");
  EXPECT_EQ(
      render("{% for x in [1, 2] %}{{ loop.previtem }}-{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}"),
      "-2a;1-b;");
  EXPECT_EQ(render("{% for x in [] %}A{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}"), "a=1,b=2,");
  EXPECT_EQ(render("{% for x in range(9) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif "
                   "%}{{ x }}{% endfor %}"),
            "023");
}

TEST(ChatTemplateScopes, LoopAssignmentsStayInsideNamespacesCarryOut) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"), "231");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
}

TEST(ChatTemplateMacros, DefaultsKeywordsAndRecursion) {
  EXPECT_EQ(render("{% macro g(name, greeting='Hello') %}{{ greeting }}, {{ name }}{% endmacro %}"
                   "{{ g('Bob') }}/{{ g('Al', greeting='Hi') }}"),
            "Hello, Bob/Hi, Al");
  EXPECT_EQ(render("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}"), "321");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, b=2) }}").message(),
            "the macro 'm' got an unexpected keyword argument 'b'");
}

TEST(ChatTemplateBlocks, BlockSetFilterBlockAndGeneration) {
  EXPECT_EQ(render("{% set b %} x{{ 1 }} {% endset %}[{{ b }}]{% set t | trim %} y {% endset %}[{{ t }}]"),
            "[ x1 ][y]");
  EXPECT_EQ(render("{% filter upper %}hi {{ 'there' }}{% endfilter %}"), "HI THERE");
  EXPECT_EQ(render("<{% generation %}reply{% endgeneration %}>"), "<reply>");
}

TEST(ChatTemplateExpressions, PythonSemantics) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'ab' * 2 }} {{ [1] + [2] }}"),
            "3 -4 2 3.5 1024 abab [1, 2]");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 0 or 'x' }} {{ 1 and 2 }}"),
            "True True True True x 2");
  EXPECT_EQ(render("{{ 'yes' if 0 else 'no' }}|{{ 'yes' if 0 }}|"), "no||");
  EXPECT_EQ(render("{{ [1, 2, 3][-1] }}{{ [1, 2, 3][::-1] }}{{ 'héllo'[1:3] }}{{ 'héllo' | length }}"),
            "3[3, 2, 1]él5");
  EXPECT_EQ(render("{{ '\\u00e9\\x41\\t|' }}{{ 'a' 'b' }}"),
            "\xc3\xa9"
            "A\t|ab");
}

TEST(ChatTemplateBlocks, WithBlocksAndMacroVarargs) {
  EXPECT_EQ(render("{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}"), "155");
  EXPECT_EQ(render("{% macro m(x) %}{{ x }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}"),
            "1(2,){'k': 3}");
}

TEST(ChatTemplateExpressions, PercentFormatting) {
  EXPECT_EQ(render("{{ '%s-%05d|%-4s|%.2f|%x' % ('a', -42, 'b', 3.14159, 255) }}"), "a--0042|b   |3.14|ff");
  EXPECT_EQ(render("{{ '%(k)s=%(v)r' % {'k': 'key', 'v': 'x'} }}{{ '%s+%s' | format(1, 2) }}"), "key='x'1+2");
  EXPECT_EQ(error_of("{{ '%s %s' % 1 }}").message(), "not enough arguments for the '%' format");
  EXPECT_EQ(render("{{ '{:>4}|{:<3}|{:05.1f}|{!r}|{n:+d}'.format('a', 'b', 2.25, 'q', n=3) }}"),
            "   a|b  |002.2|'q'|+3");
}

TEST(ChatTemplateFilters, TheOnesTemplatesUse) {
  EXPECT_EQ(render("{{ {'a': [1, 'é\"'], 'b': none, 'c': 1.5} | tojson }}"),
            "{\"a\": [1, \"é\\\"\"], \"b\": null, \"c\": 1.5}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ [1, {'a': 2}] | tojson(separators=(',', ':')) }}"), "[1,{\"a\":2}]");
  EXPECT_EQ(render("{{ ' a ' | trim }}|{{ [1, 2] | join(', ') }}|{{ x | default('d') }}|{{ 'hi there' | title }}"),
            "a|1, 2|d|Hi There");
  EXPECT_EQ(render("{{ m | selectattr('r', 'equalto', 's') | map(attribute='a') | list }}",
                   {{"m", json::parse(R"([{"a": 1, "r": "u"}, {"a": 2, "r": "s"}])")}}),
            "[2]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }}{{ [3, 1, 2] | sort }}{{ [1, 2, 1] | unique | list }}"),
            "[('a', 2), ('b', 1)][1, 2, 3][1, 2]");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2) }}|{{ '42' | int + 1 }}|{{ 'x' | int }}"), "a\n  b|43|0");
}

TEST(ChatTemplateMethods, StringAndDictMethods) {
  EXPECT_EQ(render("{{ ' a '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith('ab') }}|{{ 'a{}'.format(1) }}"),
            "a|['a', 'b']|True|a1");
  EXPECT_EQ(render("{{ {'a': 1}.get('b', 2) }}{{ {'a': 1}.get('a') }}{{ {'a': 1}.items() | list }}"), "21[('a', 1)]");
}

TEST(ChatTemplateErrors, EachNamesItsLine) {
  TemplateError e = error_of("line one\n{{ 1 + }}\n");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(std::string(e.what()), "chat template line 2: expected an expression but found the end of the print tag");
  EXPECT_EQ(error_of("a\nb\n{{ x | nosuchfilter }}").line(), 3);
  EXPECT_EQ(error_of("a\nb\n{{ x | nosuchfilter }}").message(), "unknown filter 'nosuchfilter'");
  EXPECT_EQ(error_of("\n{% include 'other.jinja' %}").message(), "the '{% include %}' tag is not supported");
  EXPECT_EQ(error_of("{% for x in y %}").message(), "the template ends before its '{% endfor %}'");
  EXPECT_EQ(error_of("{{ 'unclosed }}").message(), "a string literal is never closed");
  EXPECT_EQ(error_of("\n\n{{ a.b }}").message(), "'a' is undefined");
  EXPECT_EQ(error_of("\n\n{{ a.b }}").line(), 3);
  EXPECT_EQ(error_of("{% set l = [] %}{{ l.append(1) }}").message(),
            "calling list.append is not allowed: the sandbox forbids changing a list");
  EXPECT_EQ(error_of("{{ m | selectattr('a') | length }}", {{"m", json::array()}}).message(),
            "object of type 'generator' has no len()");
}

TEST(ChatTemplateErrors, HostileNestingIsAnErrorNotACrash) {
  EXPECT_EQ(error_of("{{ " + std::string(100000, '-') + "1 }}").message(),
            "the template nests expressions or blocks too deeply");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs = "{% if true %}" + ifs + "{% endif %}";
  EXPECT_EQ(error_of(ifs).message(), "the template nests expressions or blocks too deeply");
  EXPECT_EQ(error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}").message(),
            "macros call each other too deeply (recursion?)");
}

// Integer edges that were undefined behaviour (UBSan: signed overflow, INT64_MIN negated, a float
// past int64 converted) and widths that exhausted the memory: an error, as an overflow is elsewhere.
TEST(ChatTemplateErrors, IntegerEdgesAndHugeWidthsAreErrors) {
  const std::string too_large = "an integer result is too large";
  EXPECT_EQ(error_of("{{ (-9223372036854775807 - 1) | abs }}").message(), too_large);
  EXPECT_EQ(error_of("{{ [1, 2] | sum(start=9223372036854775807) }}").message(), too_large);
  EXPECT_EQ(render("{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904) | list }}"),
            "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]");
  EXPECT_EQ(error_of("{{ '%d' % 1e300 }}").message(), "%d got a float too large for an integer");
  const std::string too_wide = "a format's width or precision is larger than 1048576";
  EXPECT_EQ(error_of("{{ '%.9999999999f' % 1.5 }}").message(), too_wide);
  EXPECT_EQ(error_of("{{ '%99999999999d' % 1 }}").message(), too_wide);
  EXPECT_EQ(error_of("{{ '{:>99999999999}'.format(1) }}").message(), too_wide);
  EXPECT_EQ(render("{{ '%5.2f|%-4d|' % (1.5, 7) }}"), " 1.50|7   |");
}

// Strings, lists, widths and the rendering past what a chat template builds (64 MiB, a million
// items, 2^20) are errors, not an exhausted memory: repetition, joining, doubling in a loop,
// padding, and output grown statement by statement. Below the limits they render as Python does.
TEST(ChatTemplateErrors, HugeStringsListsAndWidthsAreErrors) {
  const std::string too_long = "a string would be longer than 64 MiB, more than a chat template builds";
  EXPECT_EQ(error_of("{{ 'a' * 9223372036854775807 }}").message(), too_long);
  EXPECT_EQ(error_of("{{ 9223372036854775807 * 'ab' }}").message(), too_long);
  EXPECT_EQ(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                     "{% endfor %}{{ ns.s | length }}")
                .message(),
            too_long);
  EXPECT_EQ(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                     "{% endfor %}")
                .message(),
            too_long);
  EXPECT_EQ(error_of("{% set s = 'x' * 60000000 %}{{ s }}{{ s }}").message(), too_long);
  EXPECT_EQ(error_of("{{ ([1, 2] * 600000) | length }}").message(),
            "a repeated list would hold more than 1,000,000 items, more than a chat template builds");
  EXPECT_EQ(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}")
                .message(),
            "a joined list would hold more than 1,000,000 items, more than a chat template builds");
  EXPECT_EQ(error_of("{{ 'a'.center(9223372036854775807) }}").message(), "str.center's width is larger than 1048576");
  EXPECT_EQ(error_of("{{ 'a'.ljust(2000000, '-') }}").message(), "str.ljust's width is larger than 1048576");
  EXPECT_EQ(error_of("{{ 'a\nb' | indent(9223372036854775807) }}").message(), "indent's width is larger than 1048576");
  EXPECT_EQ(render("{{ ('ab' * 3) ~ '|' ~ ([1] * 3) | length ~ '|' ~ 'x'.center(5, '-') ~ '|' ~ 'a\nb' | indent(2) }}"),
            "ababab|3|--x--|a\n  b");
  EXPECT_EQ(render("{{ ('x' * 1000000) | length }}"), "1000000");
}

TEST(ChatTemplateErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  TemplateError e = error_of("ok\n{{ raise_exception('Roles must alternate') }}");
  EXPECT_TRUE(e.raised_by_template());
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.message(), "the template refused the input: Roles must alternate");
}

TEST(ChatTemplateApply, PassesTheVariablesTransformersPasses) {
  ChatTemplate t(
      "{{ bos_token }}{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}"
      "{{ messages | length }}{{ enable_thinking }}{{ strftime_now('%Y-%m-%d') }}");
  ChatRequest r;
  r.messages = json::parse(R"([{"role": "user", "content": "hi"}])");
  r.add_generation_prompt = true;
  r.kwargs = {{"enable_thinking", false}};
  r.now = 1721995200;
  EXPECT_EQ(t.apply(r, {{"bos_token", "<s>"}}), "<s>TrueTrueTrue1False2024-07-26");
  r.kwargs["bos_token"] = "<B>";  // kwargs override the special tokens, as in transformers
  EXPECT_EQ(t.apply(r, {{"bos_token", "<s>"}}).substr(0, 3), "<B>");
}

class ChatCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("onecat_chat_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST_F(ChatCheckpoint, TemplateAndSpecialTokensFromTokenizerConfig) {
  write(
      "tokenizer_config.json",
      R"({"chat_template": "{{ bos_token }}hi", "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null})");
  auto c = onecat::chat::load_chat_template(dir_, false);
  EXPECT_EQ(c.source, "{{ bos_token }}hi");
  EXPECT_EQ(c.origin, "tokenizer_config.json");
  EXPECT_EQ(c.special_tokens.dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
  EXPECT_EQ(ChatTemplate(c.source).apply(ChatRequest{}, c.special_tokens), "<s>hi");
}

TEST_F(ChatCheckpoint, NamedTemplatesPickToolUseOnlyWithTools) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(onecat::chat::load_chat_template(dir_, false).source, "D");
  EXPECT_EQ(onecat::chat::load_chat_template(dir_, true).source, "T");
  write("chat_template.jinja", "J");  // newer transformers saves the template beside the config
  EXPECT_EQ(onecat::chat::load_chat_template(dir_, true).source, "J");
  std::filesystem::create_directories(dir_ / "additional_chat_templates");
  write("additional_chat_templates/tool_use.jinja", "TJ");
  EXPECT_EQ(onecat::chat::load_chat_template(dir_, true).source, "TJ");
  EXPECT_EQ(onecat::chat::load_chat_template(dir_, false).source, "J");
}

TEST_F(ChatCheckpoint, MissingTemplateIsAClearError) {
  write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_THROW(onecat::chat::load_chat_template(dir_, false), onecat::InputError);
  EXPECT_THROW(onecat::chat::load_chat_template(dir_ / "nope", false), onecat::InputError);
  // A named template whose name is not a string is skipped (nlohmann's type_error escaped before).
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": 5, "template": "X"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(onecat::chat::load_chat_template(dir_, false).source, "D");
  write("tokenizer_config.json", R"({"chat_template": [{"name": 5, "template": "X"}]})");
  EXPECT_THROW(onecat::chat::load_chat_template(dir_, false), onecat::InputError);
}

std::filesystem::path testdata_templates() {
  const char* data = std::getenv("ONECAT_TESTDATA");
  if (!data || !*data)
    ADD_FAILURE() << "ONECAT_TESTDATA is not set: run scripts/fetch-testdata and export the folder it prints "
                     "(scripts/test does both)";
  return data ? std::filesystem::path(data) / "templates" : std::filesystem::path();
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ChatTemplatePublished, EveryTemplateInTheTestDataParses) {
  auto folder = testdata_templates();
  if (folder.empty()) return;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".jinja") continue;
    ++count;
    EXPECT_NO_THROW(ChatTemplate{read(entry.path())}) << entry.path();
  }
  EXPECT_GT(count, 50) << folder << " holds too few templates: run scripts/fetch-testdata again";
}

TEST(ChatTemplatePublished, Qwen25RendersItsKnownPrompt) {
  auto folder = testdata_templates();
  if (folder.empty()) return;
  ChatTemplate t(read(folder / "Qwen-Qwen2.5-7B-Instruct.jinja"));
  ChatRequest r;
  r.messages = json::parse(R"([{"role": "user", "content": "Hello!"}])");
  r.add_generation_prompt = true;
  EXPECT_EQ(t.apply(r),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
