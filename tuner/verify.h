// Runs a loaded kernel on fresh random data and compares it with the CPU reference
// (runtime/cpu). Outputs are poisoned (NaN) before the launch, with a poisoned guard
// region behind them, so an unwritten or out-of-bounds element fails the check.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "codegen/family.h"
#include "runtime/jit/module_table.h"

namespace onecat {

struct CheckResult {
  bool passed = false;
  double error = 0;      // the family's error metric (below), gpu against the reference
  std::string metric;    // how `error` is measured
  double tolerance = 0;  // the family's bound for that error
  int64_t rows = 0;
  uint64_t seed = 0;         // reproduces the inputs
  std::string detail;        // what failed, where
};

// fp16 outputs: rounding once in fp32 vs fp64 may differ by one unit in the last place
// (2^-10 relative); two units is the bound.
inline constexpr double kHalfRelTolerance = 2.0 / 1024;
// Below the smallest normal fp16 value relative error is meaningless.
inline constexpr double kHalfAbsFloor = 1.0 / 16384;
// One fp16 unit in the last place at |x|: 2^(e-10) for a normal value, 2^-24 below 2^-14.
inline double half_ulp(double x) {
  const double a = std::fabs(x);
  return a < 0x1p-14 ? 0x1p-24 : std::ldexp(1.0, std::ilogb(a) - 10);
}

// seed 0: draw a fresh one.
CheckResult check_kernel(const Family& family, const std::string& spec, const std::string& config,
                         const LoadedKernel& kernel, int64_t rows, uint64_t seed = 0);

// The families' checks (check_kernel picks one).
CheckResult check_rmsnorm(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t rows,
                          uint64_t seed);
CheckResult check_gemm(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t m,
                       uint64_t seed);
CheckResult check_attention(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t m,
                            uint64_t seed);
// Bit-exact rows, zero rows for ids outside the table's slice.
CheckResult check_embedding(const std::string& spec, const std::string& config, const LoadedKernel& kernel,
                            int64_t tokens, uint64_t seed);
// Every scaling, positions up to 128K; the element-wise bound is in tuner/verify_rope.cpp.
CheckResult check_rope(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t tokens,
                       uint64_t seed);
CheckResult check_sampling(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t rows,
                           uint64_t seed);
// route bit-exact (weights within 1e-5), gate_up/down with the gemm family's bounds on a
// skewed routing, combine within one fp16 ulp of the exact sum plus fp32's accumulation error
// (tuner/verify_moe.cpp).
CheckResult check_moe(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t tokens,
                      uint64_t seed);

// Compares fp16 outputs (as raw bits) element by element: error = max |gpu - ref| /
// (|ref| + kHalfAbsFloor); on failure fills detail.
void compare_half(const uint16_t* gpu, const uint16_t* ref, int64_t count, const char* name, CheckResult& result);

}  // namespace onecat
