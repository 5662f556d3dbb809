#include "models/model/kv_pages.h"

#include <string>

#include "base/error.h"

namespace onecat::model {

KvPages::KvPages(int64_t pages, int page_size) : page_size_(page_size), used_(size_t(pages), false) {
  if (pages <= 0 || page_size <= 0) throw Error("a KV cache needs at least one page of at least one token");
  free_.reserve(size_t(pages));
  // Page 0 on top, so a fresh pool hands out pages in order.
  for (int64_t p = pages - 1; p >= 0; --p) free_.push_back(int32_t(p));
}

std::optional<int32_t> KvPages::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t page = free_.back();
  free_.pop_back();
  used_[size_t(page)] = true;
  return page;
}

void KvPages::release(int32_t page) {
  if (page < 0 || page >= pages() || !used_[size_t(page)]) {
    throw Error("KV page " + std::to_string(page) + " released but not allocated");
  }
  used_[size_t(page)] = false;
  free_.push_back(page);
}

}  // namespace onecat::model
