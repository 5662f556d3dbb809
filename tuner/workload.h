// The inputs a kernel family's kernels run on during tuning: fresh random data on the GPU,
// rotated through enough copies that the L2 never serves a repeat (METHOD.md), and the
// check of a candidate against the family's reference on fresh inputs of its own.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "codegen/family.h"
#include "runtime/jit/module_table.h"
#include "tuner/verify.h"

namespace onecat {

// What one launch must at least move through memory and compute: a benchmark's ceilings
// (bytes at the copy bandwidth, flops at the measured fp16 tensor rate).
struct Traffic {
  double bytes = 0;  // inputs read once, outputs written once
  double flops = 0;  // multiply-adds count two; 0 for a family that is all memory traffic
};

class Workload {
 public:
  virtual ~Workload() = default;
  // Enqueues launch number i of `kernel` (built with `config`) on `stream` (nullptr: the
  // default stream); the inputs rotate with i.
  virtual void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream = nullptr) = 0;
  // Runs `kernel` (built with `config`) once on poisoned outputs and compares it with the
  // reference; the reference is computed once per workload and shared by every candidate.
  virtual CheckResult check(const LoadedKernel& kernel, const std::string& config) = 0;
  virtual Traffic traffic() const = 0;
  // Why `config` cannot run in this process (gemm strategy=cublas without a loadable cuBLAS),
  // or empty: the tuner records such a candidate as "unavailable" and times the others.
  virtual std::string unavailable(const std::string& /*config*/) const { return ""; }

  // A peer on the same inputs, for `onecat bench` (gemm: cuBLAS on the dequantised weights);
  // none by default. peer_name() is empty without one.
  virtual std::string peer_name() const { return ""; }
  virtual void launch_peer(int /*i*/, CUstream /*stream*/) {}
  // ‖kernel − peer‖ / ‖peer‖ on the same inputs; −1 without a peer.
  virtual double error_vs_peer(const LoadedKernel& /*kernel*/, const std::string& /*config*/) { return -1; }

  // A peer made of the project's own kernels (moe decode: the layer as its four launches) loads
  // them through this: `spec` at its default config for the workload's token count on this GPU.
  // `onecat bench` hands it over before asking for peer_name(); without it there is no such peer.
  struct OwnKernel {
    const LoadedKernel* kernel = nullptr;
    std::string config;
  };
  using OwnKernels = std::function<OwnKernel(const std::string& spec)>;
  virtual void use_own_kernels(const OwnKernels& /*load*/) {}
};

// For spec at token count m, on the current GPU. Throws Error for a family without one.
// The gemm workload keeps the last spec's random weights (and their reference copies) for
// the next call with the same spec: tuning walks one spec's buckets in a row. context > 0:
// m sequences of exactly that many keys each (attention decode and verify only; InputError
// for any other spec), instead of the tuning workload's own.
std::unique_ptr<Workload> make_workload(const Family& family, const std::string& spec, int64_t m, uint64_t seed = 0,
                                        int64_t context = 0);
// Frees the weights kept for the next call.
void release_workloads();

// Copies of `bytes` of input that together exceed the L2 three times (at least 1).
int rotation_copies(size_t bytes, int l2_bytes);

}  // namespace onecat
