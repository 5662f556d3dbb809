// Dispatch of tuned kernels: the engine registers each op's spec once, then every call
// maps its token count to a bucket and reads the prepared kernel from a table — no
// hashing, no compiling, no store access on the request path (ARCHITECTURE.md rules 1, 4).
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/record.h"

namespace onecat {

struct LoadedKernel;

struct DispatchEntry {
  const LoadedKernel* kernel = nullptr;
  std::string config;
  bool tuned = false;  // false: the family default (no tuning record for this device)
};

class Dispatcher {
 public:
  // Buckets: 1, 2, 4, …, 4096 (the index is log2 of the bucket).
  static constexpr int kBuckets = std::bit_width(uint64_t(kMaxTuningBucket));
  static int bucket_index(int64_t m);  // of bucket_for(m)

  // resolve(spec, bucket) prepares an entry: the tuned record's config or the default, its
  // kernel loaded. It runs once per (spec, bucket), on first use; tests pass a fake.
  using Resolver = std::function<DispatchEntry(const std::string& spec, int64_t bucket)>;
  explicit Dispatcher(Resolver resolve);

  // Registers a canonical spec; the handle indexes the table.
  int add_spec(const std::string& spec);
  // The entry for m tokens: a table read once prepared.
  const DispatchEntry& kernel_for(int spec_handle, int64_t m) {
    Row& row = table_[size_t(spec_handle)];
    const int b = bucket_index(m);
    if (!row.ready[size_t(b)]) prepare(row, b);
    return row.entries[size_t(b)];
  }
  const std::string& spec(int handle) const { return table_[size_t(handle)].spec; }

 private:
  struct Row {
    std::string spec;
    std::array<DispatchEntry, kBuckets> entries{};
    std::array<bool, kBuckets> ready{};
  };
  void prepare(Row& row, int bucket_index);
  Resolver resolve_;
  std::vector<Row> table_;
};

}  // namespace onecat
