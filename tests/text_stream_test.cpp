// engine::TextStream: generated ids → text pieces with stop strings found across token
// boundaries, on a real byte-level BPE tokenizer (every byte a token, plus a few longer tokens
// chosen so that tokens split the stop strings and a two-byte character).
#include "engine/text_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "test_util.h"

using onecat::engine::TextStream;
using onecat::tokenizer::Tokenizer;

namespace {

using onecat::test::byte_char;

const std::vector<std::string> kExtra = {"ab", "cS", "TO", "Pd", "ST", "OP"};

Tokenizer tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  for (size_t i = 0; i < kExtra.size(); ++i) vocab[kExtra[i]] = 256 + int(i);
  vocab["<eos>"] = 262;
  nlohmann::json j{{"added_tokens", {{{"id", 262}, {"content", "<eos>"}, {"special", true}, {"normalized", false}}}},
                   {"normalizer", nullptr},
                   {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                   {"post_processor", nullptr},
                   {"decoder", {{"type", "ByteLevel"}}},
                   {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return Tokenizer::from_hf_json(j.dump());
}

int32_t id(const Tokenizer& t, const std::string& token) {
  const auto i = t.token_to_id(token);
  EXPECT_TRUE(i.has_value()) << token;
  return i.value_or(0);
}

// Runs ids through a stream: the piece after each id, then finish()'s.
std::vector<std::string> pieces(TextStream& s, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t i : ids) out.push_back(s.step(i));
  out.push_back(s.finish());
  return out;
}

std::string joined(const std::vector<std::string>& p) {
  std::string out;
  for (const auto& s : p) out += s;
  return out;
}

}  // namespace

TEST(TextStream, WithoutStopsEqualsDecodeAndSkipsSpecialTokens) {
  const Tokenizer t = tokenizer();
  const std::vector<int32_t> ids = {id(t, "ab"), id(t, "cS"), id(t, "Ġ"), id(t, "<eos>")};
  TextStream s(t, {});
  const auto p = pieces(s, ids);
  EXPECT_EQ(joined(p), "abcS ");
  EXPECT_EQ(joined(p), t.decode(ids, true));
  EXPECT_EQ(p[0], "ab");
  EXPECT_EQ(p[3], "");  // <eos>
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, StopStringSplitAcrossThreeTokens) {
  const Tokenizer t = tokenizer();
  TextStream s(t, {"STOP"});
  EXPECT_EQ(s.step(id(t, "ab")), "ab");
  EXPECT_EQ(s.step(id(t, "cS")), "c");  // "S" may start "STOP": held back
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.step(id(t, "TO")), "");  // "STO" still may
  EXPECT_EQ(s.step(id(t, "Pd")), "");  // "STOP" found; "d" after it is dropped
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.step(id(t, "ab")), "");
  EXPECT_EQ(s.finish(), "");
}

TEST(TextStream, HeldTextIsReleasedWhenItTurnsOutNotToBeAStop) {
  const Tokenizer t = tokenizer();
  TextStream s(t, {"STOP"});
  EXPECT_EQ(s.step(id(t, "ST")), "");
  EXPECT_EQ(s.step(id(t, "ab")), "STab");
  EXPECT_EQ(s.step(id(t, "cS")), "c");
  EXPECT_EQ(s.finish(), "S");  // the end of generation releases what was held
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, StopInsideOneTokenAndAtTheStart) {
  const Tokenizer t = tokenizer();
  TextStream inside(t, {"bc"});
  EXPECT_EQ(joined(pieces(inside, {id(t, "ab"), id(t, "cS")})), "a");
  EXPECT_TRUE(inside.stopped());
  TextStream start(t, {"ST"});
  EXPECT_EQ(joined(pieces(start, {id(t, "ST"), id(t, "ab")})), "");
  EXPECT_TRUE(start.stopped());
}

TEST(TextStream, EarliestOfSeveralStopsWins) {
  const Tokenizer t = tokenizer();
  TextStream s(t, {"OPd", "cST", "TOP"});
  // "ab" "cS" "TO" "Pd": "cST" starts at 2, "TOP" at 4, "OPd" at 5.
  EXPECT_EQ(joined(pieces(s, {id(t, "ab"), id(t, "cS"), id(t, "TO"), id(t, "Pd")})), "ab");
  EXPECT_TRUE(s.stopped());
}

TEST(TextStream, MultiByteCharacterSplitAcrossByteTokens) {
  const Tokenizer t = tokenizer();
  const std::string e_acute = "\xC3\xA9";  // é: two byte tokens
  TextStream s(t, {e_acute + "!"});
  EXPECT_EQ(s.step(id(t, "ab")), "ab");
  EXPECT_EQ(s.step(id(t, byte_char(0xC3))), "");  // half a character: never emitted
  EXPECT_EQ(s.step(id(t, byte_char(0xA9))), "");  // "é" may start "é!"
  EXPECT_EQ(s.step(id(t, "!")), "");
  EXPECT_TRUE(s.stopped());

  TextStream other(t, {e_acute + "?"});
  const auto p = pieces(other, {id(t, byte_char(0xC3)), id(t, byte_char(0xA9)), id(t, "!")});
  EXPECT_EQ(p[0], "");
  EXPECT_EQ(p[2], e_acute + "!");
  EXPECT_FALSE(other.stopped());
}

TEST(TextStream, EmptyStopStringAndUnknownIds) {
  const Tokenizer t = tokenizer();
  EXPECT_THROW(TextStream(t, {"x", ""}), onecat::InputError);
  TextStream s(t, {});
  EXPECT_EQ(s.step(100000), "");  // past the tokenizer's vocabulary (a padded model vocabulary)
  EXPECT_EQ(s.step(id(t, "ab")), "ab");
}
