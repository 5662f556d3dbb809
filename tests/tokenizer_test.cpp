// The tokenizer against Hugging Face: every BPE vocabulary of the pinned llama.cpp test
// set (GGUF files with the ids `tokenizers` produced for their inputs) must give identical
// ids; plus streaming decode, added tokens and the errors people see.
#include "models/tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include "base/error.h"
#include "models/tokenizer/decode_stream.h"
#include "models/tokenizer/regex.h"
#include "models/tokenizer/unicode.h"
#include "test_util.h"

namespace fs = std::filesystem;
using onecat::tokenizer::DecodeStream;
using onecat::tokenizer::Tokenizer;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// llama.cpp's format: inputs separated by a marker line; one line of ids per input.
struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> read_cases(const fs::path& gguf) {
  std::string inp = read(gguf.string() + ".inp"), out = read(gguf.string() + ".out");
  const std::string marker = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(marker, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + marker.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    std::getline(lines, line);
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// Vocabularies with expected ids that onecat does not tokenize, and why. The test checks
// that exactly these fail to load, so a regression cannot hide here.
const std::set<std::string> kExcluded = {
    "ggml-vocab-bert-bge.gguf",  // WordPiece (BERT): not a BPE model
};

std::vector<fs::path> vocabularies_with_expectations() {
  std::vector<fs::path> v;
  fs::path dir = onecat::test::testdata();
  if (dir.empty()) return v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gguf" && fs::exists(e.path().string() + ".out")) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST(Tokenizer, GgufVocabulariesMatchHuggingFace) {
  auto vocabs = vocabularies_with_expectations();
  ASSERT_FALSE(vocabs.empty());
  std::set<std::string> unsupported;
  size_t passed = 0;
  for (const auto& path : vocabs) {
    std::string name = path.filename().string();
    std::optional<Tokenizer> tok;
    try {
      tok = Tokenizer::from_gguf(path);
    } catch (const onecat::Error& e) {
      unsupported.insert(name);
      EXPECT_TRUE(kExcluded.count(name)) << name << " does not load: " << e.what();
      continue;
    }
    EXPECT_FALSE(kExcluded.count(name)) << name << " is listed as excluded but loads; take it off the list.";
    auto cases = read_cases(path);
    ASSERT_GT(cases.size(), 30u) << name;
    size_t ok = 0;
    for (const auto& c : cases) {
      auto ids = tok->encode(c.text, false);
      EXPECT_EQ(ids, c.ids) << name << " on " << testing::PrintToString(c.text);
      ok += ids == c.ids;
    }
    passed += ok == cases.size();
  }
  EXPECT_EQ(unsupported, kExcluded);
  std::printf("%zu of %zu vocabularies identical to Hugging Face\n", passed, vocabs.size() - unsupported.size());
}

namespace {

std::vector<std::pair<std::string, Tokenizer>> supported_vocabularies() {
  std::vector<std::pair<std::string, Tokenizer>> v;
  for (const auto& path : vocabularies_with_expectations())
    if (!kExcluded.count(path.filename().string()))
      v.emplace_back(path.filename().string(), Tokenizer::from_gguf(path));
  return v;
}

void expect_stream_equals_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special,
                                 const std::string& what) {
  DecodeStream stream(tok, skip_special);
  std::string joined;
  for (int32_t id : ids) {
    std::string piece = stream.step(id);
    EXPECT_TRUE(onecat::tokenizer::is_valid_utf8(piece)) << what << ": a piece is not whole UTF-8";
    joined += piece;
  }
  joined += stream.finish();
  EXPECT_EQ(joined, tok.decode(ids, skip_special)) << what;
}

}  // namespace

// The concatenated pieces of a stream equal decode() of all ids, and no piece ends inside
// a character: on the expected sequences and on random ones (which are full of byte tokens
// that only together make a character, or never do).
TEST(Tokenizer, StreamingDecodeEqualsDecode) {
  std::mt19937 rng(7);
  for (const auto& [name, tok] : supported_vocabularies()) {
    fs::path path = onecat::test::testdata() / name;
    for (const auto& c : read_cases(path)) expect_stream_equals_decode(tok, c.ids, false, name + " expected ids");
    std::uniform_int_distribution<int32_t> any(0, int32_t(tok.vocab_size()) - 1);
    for (int round = 0; round < 20; ++round) {
      std::vector<int32_t> ids;
      for (int i = 0; i < 40; ++i) ids.push_back(any(rng));
      expect_stream_equals_decode(tok, ids, round % 2 == 1, name + " random ids");
    }
    // Byte-heavy: the ids of random UTF-8 split at random, and byte-fallback tokens.
    std::vector<int32_t> bytes;
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      if (auto id = tok.token_to_id(hex)) bytes.push_back(*id);
    }
    if (!bytes.empty()) {
      std::uniform_int_distribution<size_t> pick(0, bytes.size() - 1);
      for (int round = 0; round < 20; ++round) {
        std::vector<int32_t> ids;
        for (int i = 0; i < 30; ++i) ids.push_back(i % 3 ? bytes[pick(rng)] : any(rng));
        expect_stream_equals_decode(tok, ids, false, name + " byte tokens");
      }
    }
    std::vector<int32_t> emoji = tok.encode("🚀 (normal) 😶‍🌫️ 你好, мир! é", false);
    expect_stream_equals_decode(tok, emoji, false, name + " emoji");
  }
}

TEST(Tokenizer, DecodeInvertsEncodeForByteLevelVocabularies) {
  for (const char* name : {"ggml-vocab-llama-bpe.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-qwen35.gguf"}) {
    Tokenizer tok = Tokenizer::from_gguf(onecat::test::testdata() / name);
    for (const auto& c : read_cases(onecat::test::testdata() / name))
      EXPECT_EQ(tok.decode(tok.encode(c.text, false)), c.text) << name;
  }
}

TEST(Tokenizer, SpecialTokensAndTemplate) {
  Tokenizer llama3 = Tokenizer::from_gguf(onecat::test::testdata() / "ggml-vocab-llama-bpe.gguf");
  auto ids = llama3.encode("<|start_header_id|>user<|end_header_id|>Hi<|eot_id|>", true);
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids.front(), 128000);  // BOS from the template
  EXPECT_EQ(ids[1], 128006);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_TRUE(llama3.is_special(128009));
  EXPECT_EQ(llama3.decode(ids, true), "userHi");
  EXPECT_EQ(llama3.decode(ids, false), "<|begin_of_text|><|start_header_id|>user<|end_header_id|>Hi<|eot_id|>");
  EXPECT_EQ(llama3.bos_token_id(), 128000);
  EXPECT_EQ(llama3.token_to_id("<|eot_id|>"), 128009);

  Tokenizer llama2 = Tokenizer::from_gguf(onecat::test::testdata() / "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(llama2.encode("Hello", true), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(llama2.encode("Hello", false), (std::vector<int32_t>{15043}));
  EXPECT_EQ(llama2.encode("", true), (std::vector<int32_t>{1}));
  // The normalizer runs on each stretch between added tokens: both words get a ▁.
  EXPECT_EQ(llama2.encode("Hello</s>Hello", false), (std::vector<int32_t>{15043, 2, 15043}));
  EXPECT_EQ(llama2.decode(std::vector<int32_t>{1, 15043, 3186}, true), "Hello world");
}

TEST(Tokenizer, OnigurumaPatternsBecomePcre2) {
  using onecat::tokenizer::pcre2_pattern_from_oniguruma;
  EXPECT_EQ(pcre2_pattern_from_oniguruma("a\\sb"),
            "a[\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{"
            "3000}]b");
  EXPECT_EQ(pcre2_pattern_from_oniguruma("[^\\s\\p{L}]").substr(0, 8), "[^\\x{9}-");
  // Categories gain what PCRE2's Unicode 14 lacks (here Kaktovik numerals, Unicode 15).
  EXPECT_NE(pcre2_pattern_from_oniguruma("\\p{N}{1,3}").find("\\x{1D2C0}-\\x{1D2D3}"), std::string::npos);
  EXPECT_EQ(pcre2_pattern_from_oniguruma("\\p{Zs}"), "\\p{Zs}");
  EXPECT_THROW(pcre2_pattern_from_oniguruma("[\\S]"), onecat::Error);
  // U+180E is not White_Space (PCRE2's own \s takes it), U+3000 is.
  onecat::tokenizer::Regex space("\\s+");
  std::vector<std::pair<size_t, size_t>> found;
  space.for_each_match(
      "a\xE1\xA0\x8E"
      "b\xE3\x80\x80"
      "c",
      [&](size_t b, size_t e) { found.emplace_back(b, e); });
  EXPECT_EQ(found, (std::vector<std::pair<size_t, size_t>>{{5, 8}}));
}

TEST(Tokenizer, LossyUtf8FollowsTheMaximalSubpartRule) {
  using onecat::tokenizer::utf8_lossy;
  EXPECT_EQ(utf8_lossy("a\xE4\xB8"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");                                                                 // truncated: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xF0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // F0 80 is never valid
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_lossy("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(onecat::tokenizer::incomplete_utf8_tail("ab\xE4\xB8"), 2u);
  EXPECT_EQ(onecat::tokenizer::incomplete_utf8_tail("ab\xC3\xA9"), 0u);
}

namespace {

// A tiny tokenizer.json: byte-level BPE over "ab" with one added token.
std::string tiny_tokenizer_json(const std::string& normalizer = "null", const std::string& model_type = "BPE") {
  return R"({"added_tokens": [{"id": 5, "content": "<eos>", "special": true, "normalized": false}],
    "normalizer": )" +
         normalizer + R"(, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null, "decoder": {"type": "ByteLevel"},
    "model": {"type": ")" +
         model_type + R"(", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4, "<eos>": 5},
              "merges": ["a b", ["Ġ", "ab"]]}})";
}

template <class E>
void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Tokenizer, LoadsTokenizerJson) {
  Tokenizer tok = Tokenizer::from_hf_json(tiny_tokenizer_json());
  EXPECT_EQ(tok.encode("ab ab<eos>"), (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 4, 5}, true), "ab ab");
  EXPECT_EQ(tok.vocab_size(), 6u);
}

TEST(Tokenizer, ErrorsSayWhatIsWrong) {
  using onecat::Error;
  using onecat::InputError;
  expect_error<InputError>([] { Tokenizer::load("/nonexistent/model"); }, "does not exist");
  fs::path dir = fs::temp_directory_path() / ("onecat_tok_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  expect_error<InputError>([&] { Tokenizer::load(dir); }, "tokenizer.json");
  std::ofstream(dir / "tokenizer.json") << "{\"model\": ";
  expect_error<InputError>([&] { Tokenizer::load(dir); }, "not valid JSON");
  std::ofstream(dir / "tokenizer.json") << "{\"model\": 1e400}";  // out_of_range, not parse_error
  expect_error<InputError>([&] { Tokenizer::load(dir); }, "not valid JSON");
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer_json(R"({"type": "Lowercase"})");
  expect_error<InputError>([&] { Tokenizer::load(dir); }, "'Lowercase'");  // the file's problem: exit 2
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer_json("null", "WordPiece");
  expect_error<InputError>([&] { Tokenizer::load(dir); }, "'WordPiece'");
  std::string unknown_merge = tiny_tokenizer_json();
  unknown_merge.replace(unknown_merge.find("\"a b\""), 5, "\"a z\"");
  std::ofstream(dir / "tokenizer.json") << unknown_merge;
  expect_error<InputError>([&] { Tokenizer::load(dir); }, "'a z'");
  std::ofstream(dir / "truncated.gguf") << "GGUF\x03";
  expect_error<InputError>([&] { Tokenizer::load(dir / "truncated.gguf"); }, "truncated");
  std::ofstream(dir / "other.gguf") << "not a gguf";
  expect_error<InputError>([&] { Tokenizer::load(dir / "other.gguf"); }, "not a GGUF file");
  fs::remove_all(dir);
  expect_error<Error>([] { Tokenizer::from_gguf(onecat::test::testdata() / "ggml-vocab-bert-bge.gguf"); }, "'bert'");

  Tokenizer tok = Tokenizer::from_hf_json(tiny_tokenizer_json());
  expect_error<InputError>([&] { tok.encode("a\xFF"); }, "not valid UTF-8");
  expect_error<InputError>([&] { tok.decode(std::vector<int32_t>{99}); }, "99");
}

// What transformers adds on top of tokenizer.json: BOS/EOS names from tokenizer_config.json,
// the Llama classes' add_bos_token, every stop id of generation_config.json.
TEST(Tokenizer, CheckpointDirectoryConfigs) {
  fs::path dir = fs::temp_directory_path() / ("onecat_tok_config_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer_json();
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": true, "bos_token": {"content": "a"}, "eos_token": "<eos>"})";
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [5, 1]})";
  Tokenizer tok = Tokenizer::load(dir);
  EXPECT_EQ(tok.bos_token_id(), 0);
  EXPECT_EQ(tok.eos_token_ids(), (std::vector<int32_t>{5, 1}));
  EXPECT_EQ(tok.encode("ab"), (std::vector<int32_t>{0, 2}));  // BOS "a" from add_bos_token
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{2}));
  fs::remove_all(dir);
}

// A field of the wrong type in any of the checkpoint's tokenizer files is an InputError naming
// the file (nlohmann's type_error escaped before: the CLI and the server aborted).
TEST(Tokenizer, FieldsOfTheWrongTypeAreInputErrors) {
  fs::path dir = fs::temp_directory_path() / ("onecat_tok_types_" + std::to_string(::getpid()));
  struct Case {
    std::string tokenizer, config, generation, says;
  };
  const std::string ok = tiny_tokenizer_json();
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string j = ok;
    j.replace(j.find(from), from.size(), to);
    return j;
  };
  const std::vector<Case> cases{
      {ok, R"({"tokenizer_class": 5})", "{}", "tokenizer_config.json does not have the expected structure"},
      {ok, R"({"bos_token": {"content": 5}})", "{}", "tokenizer_config.json does not have the expected structure"},
      {ok, "{}", R"({"eos_token_id": ["x"]})", "generation_config.json does not have the expected structure"},
      {replaced(R"("post_processor": null)", R"("post_processor": 5)"), "{}", "{}", "post_processor"},
      {replaced(R"("decoder": {"type": "ByteLevel"})", R"("decoder": {"type": -0.5})"), "{}", "{}", "decoder"},
      {replaced(R"("pre_tokenizer": {)", R"("pre_tokenizer": true, "x": {)"), "{}", "{}", "pre_tokenizer"},
  };
  for (const Case& c : cases) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << c.tokenizer;
    std::ofstream(dir / "tokenizer_config.json") << c.config;
    std::ofstream(dir / "generation_config.json") << c.generation;
    expect_error<onecat::InputError>([&] { Tokenizer::load(dir); }, c.says);
  }
  fs::remove_all(dir);
}

// Damaged files: every truncation of a GGUF's metadata and random byte flips in a
// tokenizer.json give an onecat error (a sentence), never a crash or a foreign exception.
TEST(Tokenizer, DamagedFilesGiveErrors) {
  fs::path dir = fs::temp_directory_path() / ("onecat_tok_damaged_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string gguf = read(onecat::test::testdata() / "ggml-vocab-phi-3.gguf");
  ASSERT_GT(gguf.size(), 1000u);
  std::mt19937 rng(11);
  for (int i = 0; i < 24; ++i) {
    size_t cut = i < 8 ? size_t(i) * 3 : std::uniform_int_distribution<size_t>(0, gguf.size() - 1)(rng);
    std::ofstream(dir / "cut.gguf", std::ios::binary) << gguf.substr(0, cut);
    EXPECT_THROW(Tokenizer::from_gguf(dir / "cut.gguf"), onecat::InputError) << "cut at " << cut;
  }
  std::string json = tiny_tokenizer_json();
  for (int i = 0; i < 300; ++i) {
    std::string damaged = json;
    for (int flips = 0; flips < 3; ++flips)
      damaged[std::uniform_int_distribution<size_t>(0, damaged.size() - 1)(rng)] = char(rng() % 128);
    try {
      Tokenizer tok = Tokenizer::from_hf_json(damaged);
      tok.decode(tok.encode("ab ab<eos> a"));
    } catch (const onecat::Error&) {
      // a sentence for people: fine
    }
  }
  fs::remove_all(dir);
}
