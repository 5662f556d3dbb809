// serve::ReasoningSplitter: <think>…</think> at a reply's start → reasoning, the rest content,
// whole or piece by piece with the tags split across pieces.
#include "serve/reasoning.h"

#include <gtest/gtest.h>

#include <vector>

using onecat::serve::ReasoningSplitter;

namespace {

// Feeds pieces; the reasoning and content returned, concatenated.
ReasoningSplitter::Delta streamed(const std::vector<std::string>& pieces) {
  ReasoningSplitter s;
  ReasoningSplitter::Delta all;
  for (const auto& p : pieces) {
    const auto d = s.step(p);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  const auto d = s.finish();
  return {all.reasoning + d.reasoning, all.content + d.content};
}

}  // namespace

TEST(Reasoning, SplitsAtTheClosingTag) {
  const auto d = ReasoningSplitter::split("<think>\nLet me see.\n</think>\n\nParis.");
  EXPECT_EQ(d.reasoning, "\nLet me see.\n");
  EXPECT_EQ(d.content, "\n\nParis.");
}

TEST(Reasoning, WithoutThinkItIsAllContent) {
  EXPECT_EQ(ReasoningSplitter::split("Paris. </think> x").content, "Paris. </think> x");
  EXPECT_EQ(ReasoningSplitter::split("Paris. </think> x").reasoning, "");
  EXPECT_EQ(ReasoningSplitter::split("<thin").content, "<thin");
  EXPECT_EQ(ReasoningSplitter::split("").content, "");
}

TEST(Reasoning, UnfinishedThinkingIsAllReasoning) {
  const auto d = ReasoningSplitter::split("  <think>still going");
  EXPECT_EQ(d.reasoning, "still going");
  EXPECT_EQ(d.content, "");
}

TEST(Reasoning, TagsSplitAcrossPieces) {
  const std::vector<std::string> pieces = {"\n", "<th", "ink>", "a b", " c</", "thi", "nk>", "\nanswer", "!"};
  const auto d = streamed(pieces);
  EXPECT_EQ(d.reasoning, "a b c");
  EXPECT_EQ(d.content, "\nanswer!");
  // Piece by piece, nothing of a tag is ever returned.
  ReasoningSplitter s;
  for (const auto& p : pieces) {
    const auto step = s.step(p);
    EXPECT_EQ(step.reasoning.find('<'), std::string::npos) << p;
    EXPECT_EQ(step.content.find('<'), std::string::npos) << p;
  }
  // Every split of the same text gives the same result.
  const std::string text = "<think>x</think>y";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const auto e = streamed({text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(e.reasoning, "x") << cut;
    EXPECT_EQ(e.content, "y") << cut;
  }
}

// A prompt that ends inside <think> (DeepSeek-R1's and Qwen3-2507-thinking's templates): the
// reply starts in the reasoning, up to </think>; one that never closes it is all reasoning.
TEST(Reasoning, APromptThatOpensThinkStartsTheReplyInside) {
  EXPECT_TRUE(onecat::serve::opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(onecat::serve::opens_reasoning("<think>"));
  EXPECT_FALSE(onecat::serve::opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(onecat::serve::opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(onecat::serve::opens_reasoning(""));
  const std::string reply = "Let me see.\n</think>\n\nParis.";
  auto d = ReasoningSplitter::split(reply, true);
  EXPECT_EQ(d.reasoning, "Let me see.\n");
  EXPECT_EQ(d.content, "\n\nParis.");
  d = ReasoningSplitter::split("still thinking when max_tokens came", true);
  EXPECT_EQ(d.reasoning, "still thinking when max_tokens came");
  EXPECT_EQ(d.content, "");
  // Piece by piece, the closing tag cut at every place.
  for (size_t cut = 0; cut <= reply.size(); ++cut) {
    ReasoningSplitter s(true);
    ReasoningSplitter::Delta all;
    for (const std::string& piece : {reply.substr(0, cut), reply.substr(cut)}) {
      const auto p = s.step(piece);
      all.reasoning += p.reasoning;
      all.content += p.content;
    }
    const auto f = s.finish();
    EXPECT_EQ(all.reasoning + f.reasoning, "Let me see.\n") << cut;
    EXPECT_EQ(all.content + f.content, "\n\nParis.") << cut;
  }
}
