#include "engine/block_manager.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace onecat::engine {
namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

PageKey PageKey::then(std::span<const int32_t> tokens) const {
  // Two chains with different seeds and steps: a collision needs both 64-bit halves to agree,
  // and a match also compares the page's own tokens.
  PageKey k = *this;
  for (int32_t t : tokens) {
    const uint64_t v = uint64_t(uint32_t(t));
    k.a = mix(k.a ^ (v * 0x100000001b3ull));
    k.b = mix(k.b + v + 0x632be59bd9b4e019ull);
  }
  k.a = mix(k.a ^ uint64_t(tokens.size()));
  return k;
}

BlockManager::BlockManager(int64_t pages, int page_size, bool prefix_caching)
    : page_size_(page_size), prefix_caching_(prefix_caching) {
  if (pages < 1 || pages > (int64_t(1) << 31) - 1 || page_size < 1) {
    throw InputError("the KV cache needs at least one page of at least one token.");
  }
  refs_.assign(size_t(pages), 0);
  lru_at_.resize(size_t(pages));
  entry_.resize(size_t(pages));
  free_.reserve(size_t(pages));
  for (int64_t p = pages - 1; p >= 0; --p) free_.push_back(int32_t(p));
}

std::optional<int32_t> BlockManager::allocate() {
  int32_t page;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    page = evictable_.front();
    evictable_.pop_front();
    drop_from_cache(page);
  } else {
    return std::nullopt;
  }
  refs_[size_t(page)] = 1;
  return page;
}

void BlockManager::release(int32_t page) {
  if (page < 0 || page >= int32_t(refs_.size()) || refs_[size_t(page)] == 0) {
    throw Error("KV pages: page " + std::to_string(page) + " is released but not held");
  }
  if (--refs_[size_t(page)] > 0) return;
  if (entry_[size_t(page)]) {
    lru_at_[size_t(page)] = evictable_.insert(evictable_.end(), page);
  } else {
    free_.push_back(page);
  }
}

BlockManager::Match BlockManager::match_prefix(std::span<const int32_t> tokens, int64_t max_pages) {
  Match m;
  if (!prefix_caching_) return m;
  PageKey key;
  const size_t page = size_t(page_size_);
  for (size_t i = 0; int64_t(i) < max_pages && (i + 1) * page <= tokens.size(); ++i) {
    const std::span<const int32_t> own = tokens.subspan(i * page, page);
    key = key.then(own);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) break;
    const int32_t p = it->second;
    if (!std::equal(own.begin(), own.end(), entry_[size_t(p)]->tokens.begin())) break;
    // A cached page nobody holds is in the evictable list: it leaves it now.
    if (refs_[size_t(p)]++ == 0) evictable_.erase(lru_at_[size_t(p)]);
    m.pages.push_back(p);
    m.keys.push_back(key);
  }
  return m;
}

void BlockManager::cache_full_page(const PageKey& key, std::span<const int32_t> tokens, int32_t page) {
  if (!prefix_caching_ || by_key_.count(key) || entry_[size_t(page)]) return;
  if (int64_t(tokens.size()) != page_size_ || refs_[size_t(page)] == 0) {
    throw Error("KV pages: only a held page of page_size computed tokens can be cached");
  }
  by_key_.emplace(key, page);
  entry_[size_t(page)] = Entry{key, std::vector<int32_t>(tokens.begin(), tokens.end())};
}

void BlockManager::drop_from_cache(int32_t page) {
  if (!entry_[size_t(page)]) return;
  by_key_.erase(entry_[size_t(page)]->key);
  entry_[size_t(page)].reset();
}

int64_t BlockManager::total_references() const {
  int64_t sum = 0;
  for (int32_t r : refs_) sum += r;
  return sum;
}

}  // namespace onecat::engine
