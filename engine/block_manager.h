// The engine's KV pages (docs/engine.md, "Pages and the prefix cache"): the pool's page ids with
// a reference count each, and the prefix cache — full pages keyed by a 128-bit hash chained over
// every token from the sequence's start to the page's end, plus the page's own tokens (compared
// on a match), shared between sequences without a copy and kept after their last holder lets
// go until the pool runs short (then the least recently released goes first). Host bookkeeping
// only: the memory is the backend's.
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace onecat::engine {

// A full page's place in its sequence: the hash chain up to and including it.
struct PageKey {
  uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;  // the chain's root
  bool operator==(const PageKey&) const = default;
  // The key of the page holding `tokens` (one page's worth) after the page keyed `*this`.
  PageKey then(std::span<const int32_t> tokens) const;
};

class BlockManager {
 public:
  BlockManager(int64_t pages, int page_size, bool prefix_caching = true);

  int page_size() const { return page_size_; }
  int64_t pages() const { return int64_t(refs_.size()); }
  bool prefix_caching() const { return prefix_caching_; }
  // Pages no sequence holds: free, or cached and evictable.
  int64_t available() const { return int64_t(free_.size() + evictable_.size()); }
  int64_t cached() const { return int64_t(by_key_.size()); }

  // A page for a sequence to write (reference count 1): a free one, else the least recently
  // released cached page, dropped from the cache. nullopt when every page is held.
  std::optional<int32_t> allocate();
  // One reference less; at zero a cached page stays cached (evictable), another goes free.
  // Error when the page is not held.
  void release(int32_t page);

  // The cached pages holding `tokens`' leading full pages, as many as match in a row and at
  // most `max_pages` (each now held once more), with their keys.
  struct Match {
    std::vector<int32_t> pages;
    std::vector<PageKey> keys;
  };
  Match match_prefix(std::span<const int32_t> tokens, int64_t max_pages);
  // Records a full page the caller holds (its tokens all computed into it) under `key`, unless
  // caching is off or a page of that key is cached already.
  void cache_full_page(const PageKey& key, std::span<const int32_t> tokens, int32_t page);

  // The sum of every page's reference count (0 once every sequence has let go).
  int64_t total_references() const;

 private:
  struct Entry {
    PageKey key;
    std::vector<int32_t> tokens;
  };
  struct KeyHash {
    size_t operator()(const PageKey& k) const { return size_t(k.a ^ (k.b << 1)); }
  };
  void drop_from_cache(int32_t page);

  int page_size_;
  bool prefix_caching_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;                         // a stack of pages neither held nor cached
  std::list<int32_t> evictable_;                      // cached and not held, least recently released first
  std::vector<std::list<int32_t>::iterator> lru_at_;  // a page's place there (cached, not held)
  std::unordered_map<PageKey, int32_t, KeyHash> by_key_;
  std::vector<std::optional<Entry>> entry_;  // per page: its cache entry, if cached
};

}  // namespace onecat::engine
