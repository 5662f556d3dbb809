// The inputs a kernel family's kernels run on during tuning: fresh random data on the GPU,
// rotated through enough copies that the L2 never serves a repeat (METHOD.md), and the
// check of a candidate against the family's reference on fresh inputs of its own.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "codegen/family.h"
#include "runtime/jit/module_table.h"
#include "tuner/verify.h"

namespace onecat {

class Workload {
 public:
  virtual ~Workload() = default;
  // Enqueues launch number i of `kernel` (built with `config`) on the default stream;
  // the inputs rotate with i.
  virtual void launch(const LoadedKernel& kernel, const std::string& config, int i) = 0;
  // Runs `kernel` (built with `config`) once on poisoned outputs and compares it with the
  // reference; the reference is computed once per workload and shared by every candidate.
  virtual CheckResult check(const LoadedKernel& kernel, const std::string& config) = 0;
};

// For spec at token count m, on the current GPU. Throws Error for a family without one.
// The gemm workload keeps the last spec's random weights (and their reference copies) for
// the next call with the same spec: tuning walks one spec's buckets in a row.
std::unique_ptr<Workload> make_workload(const Family& family, const std::string& spec, int64_t m, uint64_t seed = 0);
// Frees the weights kept for the next call.
void release_workloads();

// Copies of `bytes` of input that together exceed the L2 three times (at least 1).
int rotation_copies(size_t bytes, int l2_bytes);

}  // namespace onecat
