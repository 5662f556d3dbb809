// Loaded kernels of this process, keyed by a fixed-size digest of the binary key: a
// launch is one hash-table lookup, never a compile (ARCHITECTURE.md, rule 1).
#pragma once
#include <atomic>
#include <array>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "cache/record.h"
#include "codegen/family.h"
#include "codegen/kernel_call.h"
#include "runtime/cuda/driver.h"

namespace onecat {

using ModuleKey = std::array<uint8_t, 16>;
ModuleKey module_key(const std::string& binary_key_hex);

struct ModuleKeyHash {
  size_t operator()(const ModuleKey& k) const {
    size_t h;
    static_assert(sizeof(h) <= sizeof(ModuleKey));
    __builtin_memcpy(&h, k.data(), sizeof(h));
    return h;
  }
};

struct LoadedKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  std::string lowered_name;
  int registers = 0;  // as the driver reports it for this GPU
  // Launched with programmatic stream serialization (sm_90+, templates/common/grid.cuh): its
  // CTAs may be scheduled before the kernel it follows in the stream ends.
  bool programmatic = false;
  // Dynamic shared memory the function has been allowed beyond the default 48 KiB.
  mutable std::atomic<unsigned> shared_opt_in{0};
};

class ModuleTable {
 public:
  static ModuleTable& get();  // one per process, for the current device
  // The loaded kernel for a binary, loading it on first use (needs a current context).
  const LoadedKernel& load(const KernelBinary& binary);
  // nullptr when not loaded.
  const LoadedKernel* find(const ModuleKey& key) const;
  size_t size() const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<ModuleKey, std::unique_ptr<LoadedKernel>, ModuleKeyHash> table_;
};

// Whether sm_90+ kernels are launched with programmatic stream serialization: yes unless
// ONECAT_PDL=0 (to measure what it gains) or the driver predates cuLaunchKernelEx (CUDA 12.0).
bool programmatic_launch_enabled();

// Launches on `stream` (null: the legacy default stream); args point at each argument.
void launch(const LoadedKernel& kernel, const LaunchGeometry& geometry, CUstream stream, void** args);
// Launches a family op's call (codegen/<family>/op.h) on `stream`.
void launch(const LoadedKernel& kernel, const KernelCall& call, CUstream stream);

}  // namespace onecat
