#include "models/tokenizer/tokenizer.h"

#include <unordered_map>

#include "base/error.h"
#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe.h"
#include "models/tokenizer/decoder.h"
#include "models/tokenizer/definition.h"
#include "models/tokenizer/normalize.h"
#include "models/tokenizer/post_process.h"
#include "models/tokenizer/pretokenize.h"
#include "models/tokenizer/unicode.h"

namespace onecat::tokenizer {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Bpe model;
  Decoder decoder;
  PostProcessor post_processor;
  AddedTokenMatcher raw_added, normalized_added;  // matched before / after normalization
  std::unordered_map<int32_t, AddedToken> added_by_id;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> added_by_content;
  std::optional<int32_t> bos;
  std::vector<int32_t> eos;

  explicit Impl(TokenizerDefinition& d)
      : normalizer(Normalizer::from_json(d.normalizer)),
        pre_tokenizer(PreTokenizer::from_json(d.pre_tokenizer)),
        model(std::move(d.vocab), d.merges, d.bpe),
        decoder(Decoder::from_json(d.decoder)),
        post_processor(PostProcessor::from_json(d.post_processor)),
        bos(d.bos_token_id),
        eos(d.eos_token_ids) {
    std::vector<AddedToken> raw, normalized;
    std::vector<std::string> raw_patterns, normalized_patterns;
    for (auto t : d.added_tokens) {
      // As in tokenizers: an added token that the model vocabulary has keeps the model's id.
      if (auto in_model = model.vocab().find(t.content)) t.id = *in_model;
      added_by_id[t.id] = t;
      added_by_content.emplace(t.content, t.id);
      if (t.normalized) {
        normalized.push_back(t);
        normalized_patterns.push_back(normalizer.apply(t.content));
      } else {
        raw.push_back(t);
        raw_patterns.push_back(t.content);
      }
    }
    raw_added = AddedTokenMatcher(std::move(raw), raw_patterns);
    normalized_added = AddedTokenMatcher(std::move(normalized), normalized_patterns);
  }

  void encode_plain(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const {
    std::string normalized = normalizer.apply(std::string(text));
    std::vector<Piece> words;
    auto encode_words = [&](std::string_view stretch, bool stretch_at_origin) {
      words.clear();
      pre_tokenizer.split(Piece{std::string(stretch), stretch_at_origin}, words);
      for (const auto& w : words) model.encode_word(w.text, pre_tokenizer.words_are_raw_bytes(), ids);
    };
    if (normalized_added.empty()) {
      encode_words(normalized, at_origin);
      return;
    }
    for (const auto& span : normalized_added.split(normalized)) {
      if (span.token >= 0) {
        ids.push_back(span.token);
      } else {
        encode_words(std::string_view(normalized).substr(span.begin, span.end - span.begin),
                     at_origin && span.begin == 0);
      }
    }
  }
};

Tokenizer::Tokenizer(TokenizerDefinition definition) {
  // The normalizer, pre-tokenizer, decoder and post-processor are read from the file's JSON with
  // nlohmann's checked accessors: a field of the wrong type is the file's mistake.
  try {
    impl_ = std::make_shared<const Impl>(definition);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        std::string("the tokenizer's normalizer, pre_tokenizer, decoder or post_processor does not have the expected "
                    "structure (") +
        e.what() + ").");
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (!is_valid_utf8(text)) throw InputError("The text to tokenize is not valid UTF-8.");
  const Impl& t = *impl_;
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = t.post_processor.prefix;
  if (t.raw_added.empty()) {
    if (!text.empty()) t.encode_plain(text, true, ids);
  } else {
    for (const auto& span : t.raw_added.split(text)) {
      if (span.token >= 0) {
        ids.push_back(span.token);
      } else {
        t.encode_plain(text.substr(span.begin, span.end - span.begin), span.begin == 0, ids);
      }
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), t.post_processor.suffix.begin(), t.post_processor.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto added = t.added_by_id.find(id);
    if (added != t.added_by_id.end()) {
      if (!(skip_special_tokens && added->second.special)) tokens.push_back(added->second.content);
      continue;
    }
    const std::string* token = t.model.vocab().token(id);
    if (!token)
      throw InputError("Token id " + std::to_string(id) + " is not in the vocabulary (ids 0 to " +
                       std::to_string(vocab_size() - 1) + ").");
    if (skip_special_tokens) {
      auto same = t.added_by_content.find(*token);
      if (same != t.added_by_content.end() && t.added_by_id.at(same->second).special) continue;
    }
    tokens.push_back(*token);
  }
  return t.decoder.decode(std::move(tokens));
}

std::vector<std::string> Tokenizer::token_bytes() const {
  const Impl& t = *impl_;
  std::vector<std::string> out(vocab_size());
  // Decoders are not token-local (Metaspace drops the first token's leading space, Strip cuts the
  // text's first characters), so each token is decoded after an anchor token and the anchor's
  // own decoding is cut off.
  std::optional<std::string> anchor;
  std::string anchor_text;
  // Plain letters, then SentencePiece's and byte-level BPE's " a".
  const std::string candidates[] = {
      "a", "x", "e", "0", std::string("\xE2\x96\x81") + "a", std::string("\xC4\xA0") + "a"};
  for (const std::string& candidate : candidates) {
    const std::optional<int32_t> id = t.model.vocab().find(candidate);
    if (!id || t.added_by_id.count(*id)) continue;
    anchor = candidate;
    anchor_text = t.decoder.decode({*anchor}, false);
    if (!anchor_text.empty()) break;
    anchor.reset();
  }
  if (!anchor) throw Error("the tokenizer has no plain one-letter token to decode other tokens after.");
  for (size_t id = 0; id < out.size(); ++id) {
    if (t.added_by_id.count(int32_t(id))) continue;
    const std::string* token = t.model.vocab().token(int32_t(id));
    if (!token) continue;
    std::string text = t.decoder.decode({*anchor, *token}, false);
    if (text.compare(0, anchor_text.size(), anchor_text) != 0) {
      throw Error("the tokenizer's decoder changes the text before token " + std::to_string(id) +
                  "; its bytes cannot be told apart.");
    }
    out[id] = text.substr(anchor_text.size());
  }
  return out;
}

size_t Tokenizer::vocab_size() const {
  size_t n = impl_->model.vocab().id_limit();
  for (const auto& [id, token] : impl_->added_by_id) n = std::max(n, size_t(id) + 1);
  return n;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto added = impl_->added_by_content.find(token);
  if (added != impl_->added_by_content.end()) return added->second;
  return impl_->model.vocab().find(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  auto added = impl_->added_by_id.find(id);
  if (added != impl_->added_by_id.end()) return added->second.content;
  if (const std::string* token = impl_->model.vocab().token(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::is_fallback_byte(int32_t id) const {
  if (!impl_->decoder.has_byte_fallback() || impl_->added_by_id.count(id)) return false;
  const std::string* t = impl_->model.vocab().token(id);
  return t && t->size() == 6 && t->compare(0, 3, "<0x") == 0 && t->back() == '>';
}

bool Tokenizer::is_special(int32_t id) const {
  auto added = impl_->added_by_id.find(id);
  return added != impl_->added_by_id.end() && added->second.special;
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos; }
const std::vector<int32_t>& Tokenizer::eos_token_ids() const { return impl_->eos; }

Tokenizer Tokenizer::load(const std::filesystem::path& model) {
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) return from_hf_directory(model);
  if (std::filesystem::is_regular_file(model, ec)) {
    if (model.extension() == ".gguf") return from_gguf(model);
    if (model.filename() == "tokenizer.json") return from_hf_directory(model.parent_path());
    throw InputError(model.string() + " is neither a checkpoint directory, a tokenizer.json nor a .gguf file.");
  }
  throw InputError(model.string() +
                   " does not exist; pass a checkpoint directory with a tokenizer.json, or a .gguf file.");
}

}  // namespace onecat::tokenizer
