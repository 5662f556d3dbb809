// What the tuner, `onecat check` and the GPU tests need of a kernel family beyond its
// codegen: a workload of random inputs to time it on, and the GPU check of a kernel against
// the family's CPU reference (with the family's tolerance and input generator). One
// registry line per family (tuner/harness.cpp); nothing else picks a family by name.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "codegen/family.h"
#include "runtime/jit/module_table.h"
#include "tuner/verify.h"

namespace onecat {

class Workload;

struct FamilyHarness {
  std::unique_ptr<Workload> (*make_workload)(const std::string& spec, int64_t m, uint64_t seed);
  CheckResult (*check)(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t rows,
                       uint64_t seed);
  // A workload of m sequences of `context` keys each (attention decode and verify, for `onecat
  // bench`'s context points); null for families whose work has no context.
  std::unique_ptr<Workload> (*make_workload_at_context)(const std::string& spec, int64_t m, uint64_t seed,
                                                        int64_t context) = nullptr;
};

// Throws Error for a family the registry lacks.
const FamilyHarness& harness_of(const Family& family);

}  // namespace onecat
