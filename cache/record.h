// What the store keeps for one compiled kernel: GPU code and the facts about it, never
// host code (ARCHITECTURE.md, rule 3).
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

namespace onecat {

// From ptxas's report (-Xptxas -v) in NVRTC's log; -1 where the report did not say.
struct ResourceUsage {
  int registers = -1;
  int shared_bytes = 0;  // static shared memory
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_bytes = 0;
  int barriers = 0;
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

struct KernelBinary {
  std::string key;  // sha256 hex of everything that shapes the cubin (see jit/compiler.h)
  std::string family;
  std::string spec;    // canonical
  std::string config;  // canonical
  std::string arch;    // "sm_70"
  std::string nvrtc_version;
  std::string options;  // the exact NVRTC option list, space separated
  std::string cubin;    // ELF bytes
  std::string lowered_name;
  ResourceUsage usage;
  double compile_ms = 0;
};

}  // namespace onecat

namespace onecat {

// The GPU a tuning was measured on (ARCHITECTURE.md rule 2: part of the record's key).
struct DeviceFingerprint {
  std::string name;           // "Tesla V100-SXM2-32GB"
  int sm = 0;                 // compute capability, 70
  int multiprocessors = 0;    // 80 (72 on some boards)
  std::string driver;         // CUDA driver version, "12.8"
  std::string nvrtc_version;  // "12.8"
};

// The token-count buckets (ARCHITECTURE.md rule 1): 1, 2, 4, …, kMaxTuningBucket. Tuning
// records, the dispatcher and PreparedOps all bucket with these, defined once here.
inline constexpr int64_t kMaxTuningBucket = 4096;
// The bucket's index (log2 of the smallest bucket ≥ m, capped at the last); m ≥ 1.
inline int bucket_index(int64_t m) {
  constexpr int kLast = std::bit_width(uint64_t(kMaxTuningBucket)) - 1;
  return std::min(int(std::bit_width(uint64_t(m - 1))), kLast);
}
// Whether b is one of the buckets.
inline bool is_bucket(int64_t b) { return b >= 1 && b <= kMaxTuningBucket && std::has_single_bit(uint64_t(b)); }

// One candidate config's measurement in a tuning run.
struct CandidateTiming {
  std::string config;
  // "ok" (timed in full), "screened" (timed briefly, too slow to time in full), "invalid"
  // (static rules), "compile_error", "spills", "wrong" (failed the check), "unavailable" (needs a
  // library this process cannot load: gemm strategy=cublas without cuBLAS)
  std::string status;
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  std::string detail;  // why, for a status other than ok
};

// The winner for (device, family generator version, canonical spec, M bucket), with every
// candidate's timing.
struct TuningRecord {
  std::string key;  // sha256 hex of the fields above (cache/tuning_key)
  DeviceFingerprint device;
  std::string family;
  int generator_version = 0;
  std::string spec;  // canonical
  int64_t bucket = 0;
  std::string config;          // chosen
  std::string default_config;  // the family default for this bucket
  double best_us = 0;
  double default_us = 0;
  std::vector<CandidateTiming> candidates;
};

}  // namespace onecat
