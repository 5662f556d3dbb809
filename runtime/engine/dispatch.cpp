#include "runtime/engine/dispatch.h"

#include <algorithm>
#include <bit>

#include "base/error.h"

namespace onecat {

int Dispatcher::bucket_index(int64_t m) {
  if (m < 1) throw InputError("token count must be at least 1 (got " + std::to_string(m) + ")");
  return onecat::bucket_index(m);
}

Dispatcher::Dispatcher(Resolver resolve) : resolve_(std::move(resolve)) {}

int Dispatcher::add_spec(const std::string& spec) {
  for (size_t i = 0; i < table_.size(); ++i) {
    if (table_[i].spec == spec) return int(i);
  }
  table_.push_back(Row{spec, {}, {}});
  return int(table_.size() - 1);
}

void Dispatcher::prepare(Row& row, int b) {
  row.entries[size_t(b)] = resolve_(row.spec, int64_t(1) << b);
  row.ready[size_t(b)] = true;
}

}  // namespace onecat
