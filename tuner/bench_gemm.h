// The gemm benchmark: one spec at several token counts, against cuBLAS fp16 on the same
// shape (with the dequantised weights, which also checks the result) and against the
// device's measured copy bandwidth.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cache/store.h"
#include "tuner/measure.h"

namespace onecat {

struct GemmBenchPoint {
  int64_t m = 0;
  std::string config;
  std::string default_config;  // the family default for this m
  double default_us = 0;       // its time, when a sweep or --config chose another config
  int candidates = 0;          // configs timed by a sweep
  std::vector<std::pair<std::string, double>> swept;  // each timed candidate and its brief median (µs)
  Timing ours;
  double weight_bytes = 0;      // bytes of packed weight read per launch
  double weight_gbps = 0;       // weight bytes per second
  double pct_copy = 0;          // of the measured device copy bandwidth
  double tflops = 0;
  double cublas_us = 0;         // 0 when no peer ran (epilogues other than none)
  double speedup_vs_cublas = 0;
  double error_vs_cublas = -1;  // ‖ours − cuBLAS‖ / ‖cuBLAS‖ on the same inputs
  double error_vs_reference = -1;  // the family check's error (GemmRig::check), which must pass
};

struct GemmBench {
  std::string spec;
  std::string device;
  double copy_gbps = 0;
  std::vector<GemmBenchPoint> points;
};

struct GemmBenchOptions {
  std::string config;  // empty: the family default for each m
  bool sweep = false;  // time every tuning candidate for m (tuner::tuning_candidates), keep the fastest
  int jobs = 8;        // parallel compiles for a sweep
  bool graph = false;  // time with measure_graph (ours and the peer), else measure
};

GemmBench bench_gemm(const std::string& spec, const std::vector<int64_t>& ms, const GemmBenchOptions& options, Store* store);

}  // namespace onecat
