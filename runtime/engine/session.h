// The composition root of a process that runs kernels: the kernel store, the compile service,
// the GPU in use and a Dispatcher (runtime/engine/dispatch.h) whose entries are the tuned
// config for the spec and M bucket on this GPU, else the family default. The Python package
// and the engine hold it; hot paths hold PreparedOps (runtime/engine/prepared_op.h), for
// which everything after the first use of a bucket is a table read, so a warmed-up op only
// launches (CUDA graph capture works).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/dispatch.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"

namespace onecat {

// What a tuning record is keyed by for GPU `ordinal` (ARCHITECTURE.md rule 2): name, compute
// capability, SM count, driver and the NVRTC that compiles for it. Needs a GPU.
DeviceFingerprint device_fingerprint(int ordinal);

// The key of the tuning record of (canonical spec, bucket) of `family` on `device`
// (ARCHITECTURE.md rule 2): the one place a key is made from a family, a spec and a bucket.
std::string tuning_key(const DeviceFingerprint& device, const Family& family, const std::string& spec, int64_t bucket);

class Session {
 public:
  static Session& get();  // the process-wide session

  // Makes the primary context of GPU `ordinal` current (−1: GPU 0). The loaded-module table
  // is per process, so the first GPU used is the only one: another raises. Without a GPU
  // raises Error with the CLI's sentence.
  void use_gpu(int ordinal);
  Arch arch() const { return Arch{device_.sm}; }
  int ordinal() const { return ordinal_; }  // the GPU in use, −1 before the first
  const DeviceFingerprint& device() const { return device_; }

  // The dispatched kernel for a canonical spec and m tokens (compiled and loaded on first use).
  const DispatchEntry& kernel_for(const std::string& spec, int64_t m);
  // A given config of a spec (onecat.compile(...)(…)), loaded once.
  const LoadedKernel& kernel_with_config(const std::string& spec, const std::string& config);
  // Compiles (in parallel, through the cache) and loads the entries of specs × buckets; adds to
  // `stats` (when given) how many there were, how many had a tuned config and how many the
  // cache did not hold (compiled now); `each` (when given) is called once per kernel readied,
  // one call at a time (a progress bar's tick).
  struct PrepareStats {
    int kernels = 0, tuned = 0, compiled = 0;
  };
  std::vector<DispatchEntry> prepare(const std::vector<std::string>& specs, const std::vector<int64_t>& buckets, int jobs,
                                     PrepareStats* stats = nullptr, const std::function<void()>& each = {});

  Store& store();
  JitService& jit();
  Dispatcher& dispatcher();
  // The dispatcher's handle of a canonical spec (registered on first use).
  int spec_handle(const std::string& spec);
  // After set_cache_dir or an import: reopen the store, forget prepared entries.
  void reset();
  // Moves whenever dispatched entries may change (reset, a new tuning record); a PreparedOp
  // compares it on each call and resolves its buckets again when it moved.
  uint64_t generation() const { return generation_; }

  // Tuning records of the GPU in use (use_gpu first), by canonical spec and bucket.
  std::string tuning_key(const std::string& spec, int64_t bucket) const;
  std::optional<TuningRecord> find_tuning(const std::string& spec, int64_t bucket);
  // "Tune and record", defined once (`onecat tune`, onecat.tune): unless `retune`, the
  // stored record of (canonical spec, bucket) on GPU 0; else the record `tune` measures
  // there (the tuner is passed in: it sits above this layer), keyed here, written to the
  // store at once (an interrupted run keeps what it finished) and dispatched from the next
  // call on, PreparedOps included. `tuned` (optional) says whether `tune` ran.
  using Tuner = std::function<TuningRecord(const Family& family, const std::string& spec, int64_t bucket)>;
  TuningRecord tune_and_record(const std::string& spec, int64_t bucket, bool retune, const Tuner& tune,
                               bool* tuned = nullptr);

 private:
  Session() = default;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JitService> jit_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unordered_map<std::string, int> handles_;
  std::map<std::pair<std::string, std::string>, const LoadedKernel*> configured_;
  int ordinal_ = -1;
  DeviceFingerprint device_;
  uint64_t generation_ = 0;
  void forget_dispatch();
};

}  // namespace onecat
