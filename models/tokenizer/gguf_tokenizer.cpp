// Tokenizer from a GGUF file's metadata: tokenizer.ggml.model "gpt2" (byte-level BPE),
// "llama" (SentencePiece BPE, merges rebuilt from the scores) or "gemma4".
#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "models/tokenizer/definition.h"
#include "models/tokenizer/gguf.h"
#include "models/tokenizer/gguf_pretokenizers.h"
#include "models/tokenizer/tokenizer.h"

namespace onecat::tokenizer {

namespace {

using nlohmann::json;

// llama.cpp's token types.
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kMetaspace = "\xE2\x96\x81";  // ▁

// "left right": the space that separates two tokens of the vocabulary (a token may
// itself contain spaces).
std::pair<std::string, std::string> split_merge(const std::string& merge, const Vocab& vocab) {
  size_t space = merge.find(' ');
  if (space != std::string::npos && merge.find(' ', space + 1) == std::string::npos)
    return {merge.substr(0, space), merge.substr(space + 1)};
  for (; space != std::string::npos; space = merge.find(' ', space + 1)) {
    std::string left = merge.substr(0, space), right = merge.substr(space + 1);
    if (vocab.find(left) && vocab.find(right) && vocab.find(left + right)) return {left, right};
  }
  throw InputError("The GGUF merge '" + merge + "' does not split into two tokens of the vocabulary.");
}

// SentencePiece BPE keeps scores, not merges. Hugging Face's conversion makes a merge of
// every split of every piece into two pieces, ordered by the piece's score (highest
// first), splits of one piece by the ids of their halves; the same order here.
std::vector<std::pair<std::string, std::string>> merges_from_scores(const std::vector<std::string>& tokens,
                                                                    const std::vector<double>& scores,
                                                                    const Vocab& vocab) {
  struct Candidate {
    double score;
    int32_t merged, left, right;
  };
  std::vector<Candidate> candidates;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& piece = tokens[id];
    size_t first = candidates.size();
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;  // not a character boundary
      auto l = vocab.find(std::string_view(piece).substr(0, cut)), r = vocab.find(std::string_view(piece).substr(cut));
      if (l && r) candidates.push_back({scores[id], int32_t(id), *l, *r});
    }
    std::sort(candidates.begin() + first, candidates.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.left, a.right) < std::tie(b.left, b.right);
    });
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(candidates.size());
  for (const auto& c : candidates) merges.emplace_back(*vocab.token(c.left), *vocab.token(c.right));
  return merges;
}

json template_processing(const TokenizerDefinition& d, bool add_bos, bool add_eos, std::optional<int32_t> eos) {
  json single = json::array(), special = json::object();
  auto add = [&](int32_t id) {
    std::string name = *d.vocab.token(id);
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    special[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  };
  if (add_bos && d.bos_token_id && d.vocab.token(*d.bos_token_id)) add(*d.bos_token_id);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos && eos && d.vocab.token(*eos)) add(*eos);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special}};
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const std::filesystem::path& file) {
  GgufMetadata m = GgufMetadata::read(file);
  auto model = m.string("tokenizer.ggml.model");
  const GgufValue* tokens = m.find("tokenizer.ggml.tokens");
  if (!model || !tokens || tokens->strings.empty())
    throw InputError(file.string() +
                     " has no tokenizer (tokenizer.ggml.model and tokenizer.ggml.tokens are required).");
  const GgufValue* types = m.find("tokenizer.ggml.token_type");
  const GgufValue* scores = m.find("tokenizer.ggml.scores");
  const GgufValue* merges = m.find("tokenizer.ggml.merges");
  const auto& pieces = tokens->strings;
  auto type_of = [&](size_t id) {
    return types && id < types->integers.size() ? types->integers[id] : int64_t(kNormal);
  };

  TokenizerDefinition d;
  for (size_t id = 0; id < pieces.size(); ++id) d.vocab.add(pieces[id], int32_t(id));
  if (auto bos = m.integer("tokenizer.ggml.bos_token_id")) d.bos_token_id = int32_t(*bos);
  std::optional<int32_t> eos;
  if (auto e = m.integer("tokenizer.ggml.eos_token_id")) {
    eos = int32_t(*e);
    d.eos_token_ids.push_back(*eos);
  }
  if (auto e = m.integer("tokenizer.ggml.eot_token_id"); e && int32_t(*e) != eos)
    d.eos_token_ids.push_back(int32_t(*e));
  for (size_t id = 0; id < pieces.size(); ++id) {
    int64_t type = type_of(id);
    if (type != kControl && type != kUserDefined && type != kUnknown) continue;
    AddedToken t;
    t.id = int32_t(id);
    t.content = pieces[id];
    t.special = type != kUserDefined;
    d.added_tokens.push_back(std::move(t));
  }
  bool add_bos = false;
  auto add_eos = m.boolean("tokenizer.ggml.add_eos_token").value_or(false);

  if (*model == "gpt2") {
    std::string pre = m.string("tokenizer.ggml.pre").value_or("default");
    auto p = gguf_pre_tokenizer(pre);
    if (!p) throw Error("The GGUF pre-tokenizer '" + pre + "' of " + file.string() + " is not supported by onecat.");
    if (!merges) throw InputError(file.string() + " is a BPE tokenizer without tokenizer.ggml.merges.");
    for (const auto& merge : merges->strings) d.merges.push_back(split_merge(merge, d.vocab));
    d.pre_tokenizer = p->pre_tokenizer;
    d.normalizer = p->normalizer;
    d.bpe.ignore_merges = p->ignore_merges;
    d.decoder = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
    add_bos = m.boolean("tokenizer.ggml.add_bos_token").value_or(p->add_bos_by_default);
  } else if (*model == "llama" || *model == "gemma4") {
    bool gemma = *model == "gemma4";
    if (gemma) {
      if (!merges) throw InputError(file.string() + " is a BPE tokenizer without tokenizer.ggml.merges.");
      for (const auto& merge : merges->strings) d.merges.push_back(split_merge(merge, d.vocab));
    } else {
      if (!scores || scores->reals.size() != pieces.size())
        throw InputError(file.string() + " is a SentencePiece tokenizer without one score per token.");
      d.merges = merges_from_scores(pieces, scores->reals, d.vocab);
    }
    bool prefix = m.boolean("tokenizer.ggml.add_space_prefix").value_or(!gemma);
    json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}};
    d.normalizer = prefix ? json{{"type", "Sequence"},
                                 {"normalizers", {{{"type", "Prepend"}, {"prepend", kMetaspace}}, replace_space}}}
                          : replace_space;
    json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}};
    if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    d.decoder = {{"type", "Sequence"}, {"decoders", decoders}};
    d.bpe.byte_fallback = true;
    d.bpe.fuse_unk = true;
    auto unk = m.integer("tokenizer.ggml.unknown_token_id");
    if (!unk)
      for (size_t id = 0; id < pieces.size() && !unk; ++id)
        if (type_of(id) == kUnknown) unk = int64_t(id);
    if (unk && d.vocab.token(int32_t(*unk))) d.bpe.unk_token = *d.vocab.token(int32_t(*unk));
    add_bos = m.boolean("tokenizer.ggml.add_bos_token").value_or(true);
  } else {
    throw Error("The GGUF tokenizer model '" + *model + "' of " + file.string() +
                " is not supported by onecat (gpt2, llama and gemma4 BPE are).");
  }
  d.post_processor = template_processing(d, add_bos, add_eos, eos);
  return Tokenizer(std::move(d));
}

}  // namespace onecat::tokenizer
