// The tokenizer against Hugging Face: every BPE vocabulary of the pinned llama.cpp test
// set (GGUF files with the ids `tokenizers` produced for their inputs) must give identical
// ids; plus streaming decode, added tokens and the errors people see.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "models/tokenizer/decode_stream.h"
#include "models/tokenizer/regex.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tokenizer/unicode.h"
#include "runtime/cuda/error.h"

namespace fs = std::filesystem;
using onecat::tokenizer::DecodeStream;
using onecat::tokenizer::Tokenizer;

namespace {

fs::path testdata() {
  const char* dir = std::getenv("ONECAT_TESTDATA");
  if (!dir || !fs::is_directory(dir)) {
    ADD_FAILURE() << "ONECAT_TESTDATA is not set to the test vocabularies; run scripts/fetch-testdata and set "
                     "ONECAT_TESTDATA to the folder it prints (scripts/test does both).";
    return {};
  }
  return dir;
}

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
  fs::path dir = testdata();
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
