// The inputs a kernel family's kernels run on during tuning: fresh random data on the GPU,
// rotated through enough copies that the L2 never serves a repeat (METHOD.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "codegen/family.h"
#include "runtime/jit/module_table.h"

namespace onecat {

class Workload {
 public:
  virtual ~Workload() = default;
  // Enqueues launch number i of `kernel` (built with `config`) on the default stream;
  // the inputs rotate with i.
  virtual void launch(const LoadedKernel& kernel, const std::string& config, int i) = 0;
};

// For spec at token count m, on the current GPU. Throws Error for a family without one.
std::unique_ptr<Workload> make_workload(const Family& family, const std::string& spec, int64_t m);

// Copies of `bytes` of input that together exceed the L2 three times (at least 1).
int rotation_copies(size_t bytes, int l2_bytes);

}  // namespace onecat
