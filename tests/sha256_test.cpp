// SHA-256 against the NIST (FIPS 180-4 example) vectors, padding edges, incremental input
// and length-prefixed fields.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "base/sha256.h"

namespace onecat {
namespace {

std::string hex(std::string_view text) { return to_hex(sha256(text)); }

TEST(Sha256, NistVectors) {
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
                "nopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths around the 56-byte point where the length no longer fits in the last block,
  // and around block multiples (values from Python's hashlib).
  const std::pair<size_t, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
      {127, "c57e9278af78fa3cab38667bef4ce29d783787a2f731d4e12200270f0c32320a"},
      {128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"},
      {129, "c12cb024a2e5551cca0e08fce8f1c5e314555cc3fef6329ee994a3db752166ae"},
  };
  for (const auto& [n, digest] : cases) EXPECT_EQ(hex(std::string(n, 'a')), digest) << n << " bytes";
}

TEST(Sha256, BinaryInputIncludingZeroBytes) {
  std::string all;
  for (int rep = 0; rep < 3; ++rep) {
    for (int b = 0; b < 256; ++b) all.push_back(char(b));
  }
  EXPECT_EQ(hex(all), "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363");
}

TEST(Sha256, IncrementalUpdatesInOddPiecesEqualOneShot) {
  std::mt19937 rng(7);
  std::string data(5000, '\0');
  for (auto& c : data) c = char(rng());
  const Digest whole = sha256(data);
  for (size_t piece : {1u, 3u, 7u, 13u, 55u, 63u, 64u, 65u, 127u, 1000u, 4999u}) {
    Sha256 h;
    for (size_t pos = 0; pos < data.size(); pos += piece) h.update(std::string_view(data).substr(pos, piece));
    EXPECT_EQ(h.finish(), whole) << "pieces of " << piece;
  }
  // Random piece sizes, including empty updates, through the (pointer, size) overload.
  Sha256 h;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t n = std::min<size_t>(rng() % 150, data.size() - pos);
    h.update(data.data() + pos, n);
    pos += n;
  }
  EXPECT_EQ(h.finish(), whole);
  // The million 'a's fed in pieces of 997.
  Sha256 m;
  const std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    m.update(std::string_view(chunk).substr(0, n));
    left -= n;
  }
  EXPECT_EQ(to_hex(m.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FieldsAreLengthPrefixed) {
  auto fields = [](std::initializer_list<std::string_view> parts) {
    Sha256 h;
    for (auto p : parts) h.field(p);
    return to_hex(h.finish());
  };
  // Plain concatenation cannot tell these apart; fields can.
  EXPECT_EQ(to_hex(Sha256().update("ab").update("c").finish()), to_hex(Sha256().update("a").update("bc").finish()));
  EXPECT_NE(fields({"ab", "c"}), fields({"a", "bc"}));
  EXPECT_NE(fields({"abc", ""}), fields({"", "abc"}));
  EXPECT_NE(fields({"abc"}), fields({"abc", ""}));
  EXPECT_NE(fields({"a", "b"}), fields({"b", "a"}));
  EXPECT_NE(fields({"abc"}), hex("abc"));
  // Deterministic.
  EXPECT_EQ(fields({"ab", "c"}), fields({"ab", "c"}));
  // The prefix is the 8-byte little-endian length (part of every cache key's definition).
  const char prefix[8] = {3, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(fields({"abc"}), to_hex(Sha256().update(prefix, 8).update("abc").finish()));
}

TEST(Sha256, HexIsLowercaseAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::string h = hex(std::to_string(i));
    ASSERT_EQ(h.size(), 64u);
    for (char c : h) ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << h;
    EXPECT_TRUE(seen.insert(h).second);
  }
  Digest d{};
  d[0] = 0xab;
  d[31] = 0x0f;
  EXPECT_EQ(to_hex(d), "ab" + std::string(60, '0') + "0f");
}

}  // namespace
}  // namespace onecat
