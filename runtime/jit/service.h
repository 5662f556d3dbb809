// The compile service: a kernel comes from the store when its key is there, otherwise
// NVRTC compiles it and the store keeps it. Many kernels compile at once, in threads or
// in worker processes (NVRTC serialises part of its work inside one process; see
// docs/jit.md for the measurement).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cache/store.h"
#include "runtime/jit/compiler.h"

namespace onecat {

struct CompileResult {
  KernelBinary binary;
  bool cache_hit = false;
  double elapsed_ms = 0;  // lookup (+ compile on a miss) as seen by the caller
  std::string error;      // set instead of binary when this request failed (compile_all only)
};

enum class Parallelism { kThreads, kProcesses };

class JitService {
 public:
  // store may be null: then every request compiles.
  explicit JitService(Store* store) : store_(store) {}

  // One kernel; throws Error on failure.
  CompileResult get(const CompileRequest& request);

  // Many kernels with up to `jobs` at once; results in request order. A failed request
  // carries its error instead of throwing. on_done(i) is called as each one finishes.
  std::vector<CompileResult> get_all(const std::vector<CompileRequest>& requests, int jobs, Parallelism mode,
                                     const std::function<void(size_t)>& on_done = {});

 private:
  Store* store_;
};

}  // namespace onecat
