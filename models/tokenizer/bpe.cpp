#include "models/tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "base/error.h"
#include "models/tokenizer/unicode.h"

namespace onecat::tokenizer {

namespace {

constexpr uint64_t kEmptyKey = ~uint64_t(0);
// Words longer than this are not cached: they are rare and would crowd out common ones.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = 1 << 16;

uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
uint64_t hash_key(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 20; }

std::string byte_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

}  // namespace

Bpe::Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  if (options_.unk_token) unk_id_ = vocab_.find(*options_.unk_token);
  const auto& alphabet = byte_to_code_point();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, alphabet[b]);
    byte_level_ids_[b] = vocab_.find(ch).value_or(-1);
    byte_fallback_ids_[b] = vocab_.find(byte_token(uint8_t(b))).value_or(-1);
  }

  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  merge_slots_.assign(capacity, Slot{kEmptyKey, {0, 0}});
  merge_mask_ = capacity - 1;
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto l = vocab_.find(left), r = vocab_.find(right);
    joined.assign(left).append(right);
    auto m = vocab_.find(joined);
    if (!l || !r || !m)
      throw Error("The tokenizer merge '" + left + " " + right + "' (rank " + std::to_string(rank) +
                  ") names a token that is not in the vocabulary.");
    uint64_t key = pair_key(*l, *r);
    for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
      if (merge_slots_[slot].key == key) break;  // a repeated merge keeps its first (lowest) rank
      if (merge_slots_[slot].key == kEmptyKey) {
        merge_slots_[slot] = {key, {int32_t(rank), *m}};
        break;
      }
    }
  }
}

std::optional<Bpe::Merge> Bpe::find_merge(int32_t left, int32_t right) const {
  uint64_t key = pair_key(left, right);
  for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const Slot& s = merge_slots_[slot];
    if (s.key == key) return s.merge;
    if (s.key == kEmptyKey) return std::nullopt;
  }
}

void Bpe::encode_word(std::string_view word, bool raw_bytes, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  std::optional<int32_t> whole;
  if (options_.ignore_merges) whole = raw_bytes ? vocab_.find(byte_level_encode(word)) : vocab_.find(word);
  if (whole) {
    out.push_back(*whole);
  } else {
    merge_word(word, raw_bytes, out);
  }
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kMaxCachedWords) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void Bpe::merge_word(std::string_view word, bool raw_bytes, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, merged;
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();
  auto push = [&](int32_t id) {
    int32_t n = int32_t(symbols.size());
    symbols.push_back({id, n - 1, -1, true});
    if (n > 0) symbols[n - 1].next = n;
  };

  // Initial symbols: one per character, unknown ones as byte tokens or unk.
  std::optional<int32_t> pending_unk;
  auto flush_unk = [&] {
    if (pending_unk) push(*pending_unk);
    pending_unk.reset();
  };
  std::string ch;
  for (size_t pos = 0; pos < word.size();) {
    std::optional<int32_t> id;
    size_t begin = pos;
    if (raw_bytes) {
      int32_t b = byte_level_ids_[static_cast<unsigned char>(word[pos++])];
      if (b >= 0) id = b;
      if (!id) {
        ch.clear();
        append_utf8(ch, byte_to_code_point()[static_cast<unsigned char>(word[begin])]);
      }
    } else {
      pos += std::min(utf8_sequence_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
      id = vocab_.find(word.substr(begin, pos - begin));
      if (!id) ch.assign(word.substr(begin, pos - begin));
    }
    if (id) {
      flush_unk();
      push(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char b : ch) all &= byte_fallback_ids_[b] >= 0;
      if (all) {
        flush_unk();
        for (unsigned char b : ch) push(byte_fallback_ids_[b]);
        continue;
      }
    }
    if (unk_id_) {
      if (!(pending_unk && options_.fuse_unk)) flush_unk();
      pending_unk = *unk_id_;
    }
    // Without an unk token the character is dropped, as Hugging Face does.
  }
  flush_unk();

  for (int32_t i = 0; i + 1 < int32_t(symbols.size()); ++i)
    if (auto m = find_merge(symbols[i].id, symbols[i + 1].id)) heap.push_back({m->rank, i, m->merged});
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    auto current = find_merge(left.id, right.id);
    if (!current || current->merged != top.merged) continue;  // stale: a neighbour changed
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) {
      if (auto m = find_merge(symbols[left.prev].id, left.id)) {
        heap.push_back({m->rank, left.prev, m->merged});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (left.next >= 0) {
      if (auto m = find_merge(left.id, symbols[left.next].id)) {
        heap.push_back({m->rank, top.pos, m->merged});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace onecat::tokenizer
