// The KV cache's pages as the host hands them out: which of the pool's pages are free. The
// memory itself is the backend's ([pages][kv_heads][page_size][head_dim] per layer, K and V,
// docs/attention.md); a sequence holds the pages of its block table row.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace onecat::model {

class KvPages {
 public:
  KvPages(int64_t pages, int page_size);

  int64_t pages() const { return int64_t(used_.size()); }
  int page_size() const { return page_size_; }
  int64_t free_pages() const { return int64_t(free_.size()); }

  // A free page, or nullopt when every page is in use.
  std::optional<int32_t> allocate();
  // Gives a page back; Error when it is not allocated.
  void release(int32_t page);

 private:
  int page_size_;
  std::vector<int32_t> free_;  // a stack: the most recently released page is handed out first
  std::vector<bool> used_;
};

}  // namespace onecat::model
