// The autotuner: for one spec and one M bucket, every candidate config is compiled (in
// parallel, through the cache), statically pruned (compile errors, register spills),
// checked against the CPU reference on fresh random data (a wrong candidate is recorded as
// such and never chosen), and timed on the GPU (events after warm-up, rotated inputs,
// median and spread). The choice is deterministic (choose_config). Every candidate's timing
// goes into the record (ARCHITECTURE.md, rules 3-5).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/record.h"
#include "codegen/family.h"
#include "runtime/jit/service.h"

namespace onecat {

// Buckets of M the engine dispatches on (ARCHITECTURE.md rule 1): powers of two up to 4096.
inline constexpr int64_t kMaxBucket = kMaxTuningBucket;
int64_t bucket_for(int64_t m);  // the smallest bucket ≥ m (m ≥ 1), capped at kMaxBucket
std::vector<int64_t> default_buckets();  // 1, 2, 4, …, 512, 2048

// GPU 0 and the NVRTC that compiles for it.
DeviceFingerprint this_device();

// The candidates timed for (spec, m): the default that runs untuned on arch here first
// (default_config_here), then the family's own default where that differs (cuBLAS's), then those
// the family says fit the bucket.
std::vector<std::string> tuning_candidates(const Family& family, const std::string& spec, int64_t m, Arch arch);

// Among the candidates with status "ok", those within the measured run-to-run noise of the
// fastest median tie: `noise`, relative (a candidate's median moves by about 1 % between two
// tunes on one GPU, 2-µs kernels included: docs/tuner.md). Among them the default wins, then the earliest in candidate order. Returns the
// index into `timings`, or -1 when none is ok. A candidate's min–max spread does not widen the
// band: the median of many batches already absorbs a slow one, and a wider band lets a choice
// sit further from the fastest, which the next tune may not repeat.
inline constexpr double kChoiceNoise = 0.01;
int choose_config(const std::vector<CandidateTiming>& timings, const std::string& default_config,
                  double noise = kChoiceNoise);

struct TuneHooks {
  // Tests: candidates for which the check runs a deliberately wrong kernel.
  std::function<bool(const std::string& config)> sabotage;
};

// Where one tune_spec's wall time went, in seconds (reported by `onecat tune --json`).
struct TunePhases {
  double compile = 0;  // candidates compiled (or found in the cache)
  double inputs = 0;   // the workload: weights, inputs and their rotated copies
  double check = 0;    // every candidate checked against the reference (the reference made once)
  double timing = 0;   // screening and full timings
};

// Tunes (spec, bucket) on GPU 0. Throws Error when no candidate survives. `phases`, when
// given, receives where the time went.
TuningRecord tune_spec(const Family& family, const std::string& spec, int64_t bucket, JitService& jit, int jobs,
                       const TuneHooks& hooks = {}, TunePhases* phases = nullptr);

}  // namespace onecat
