// The BPE model: a word → token ids by applying ranked merges, lowest rank first and
// leftmost first among equals (the order Hugging Face tokenizers uses), with a priority
// queue so that a long word costs O(n log n).
#pragma once
#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/tokenizer/vocab.h"

namespace onecat::tokenizer {

struct BpeOptions {
  bool byte_fallback = false;  // unknown characters become <0xXX> byte tokens
  bool fuse_unk = false;       // consecutive unknown characters become one unk token
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  std::optional<std::string> unk_token;
};

class Bpe {
 public:
  // Error if a merge names a token (or a merged token) missing from the vocabulary.
  Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids of `word`. With `raw_bytes`, the word is raw bytes spelled in the
  // byte-level alphabet (its characters are looked up as their alphabet code points).
  void encode_word(std::string_view word, bool raw_bytes, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank, merged;
  };
  std::optional<Merge> find_merge(int32_t left, int32_t right) const;
  void merge_word(std::string_view word, bool raw_bytes, std::vector<int32_t>& out) const;

  Vocab vocab_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_level_ids_;     // byte → id of its alphabet character, or -1
  std::array<int32_t, 256> byte_fallback_ids_;  // byte → id of <0xXX>, or -1

  // Open-addressing table (left << 32 | right) → Merge: the hot look-up of encoding. Key
  // and value share a slot, so a probe touches one cache line.
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  std::vector<Slot> merge_slots_;
  uint64_t merge_mask_ = 0;

  // Words seen before (most text repeats its words); bounded, cleared when full.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace onecat::tokenizer
