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
  Timing ours;
  double weight_bytes = 0;      // bytes of packed weight read per launch
  double weight_gbps = 0;       // weight bytes per second
  double pct_copy = 0;          // of the measured device copy bandwidth
  double tflops = 0;
  double cublas_us = 0;         // 0 when no peer ran (epilogues other than none)
  double speedup_vs_cublas = 0;
  double error_vs_cublas = -1;  // ‖ours − cuBLAS‖ / ‖cuBLAS‖ on the same inputs
};

struct GemmBench {
  std::string spec;
  std::string device;
  double copy_gbps = 0;
  std::vector<GemmBenchPoint> points;
};

// config empty: the family default for each m.
GemmBench bench_gemm(const std::string& spec, const std::string& config, const std::vector<int64_t>& ms, Store* store);

}  // namespace onecat
