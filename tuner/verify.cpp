#include "tuner/verify.h"

#include <cmath>
#include <random>

#include "base/error.h"
#include "base/half.h"
#include "tuner/harness.h"

namespace onecat {

CheckResult check_kernel(const Family& family, const std::string& spec, const std::string& config,
                         const LoadedKernel& kernel, int64_t rows, uint64_t seed) {
  if (seed == 0) seed = std::random_device{}() | 1;
  return harness_of(family).check(spec, config, kernel, rows, seed);
}

void compare_half(const uint16_t* gpu, const uint16_t* ref, int64_t count, const char* name, CheckResult& result) {
  for (int64_t i = 0; i < count; ++i) {
    const double g = cpu::half_to_float(gpu[i]);
    const double r = cpu::half_to_float(ref[i]);
    double err = std::abs(g - r) / (std::abs(r) + kHalfAbsFloor);
    if (std::isnan(g) != std::isnan(r) || std::isinf(g) != std::isinf(r)) err = INFINITY;
    if (std::isnan(g) && std::isnan(r)) err = 0;
    if (!(err <= result.error)) {
      result.error = err;
      if (err > result.tolerance && result.detail.empty()) {
        result.detail = std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(g) + ", expected " +
                        std::to_string(r) + (std::isnan(g) ? " (never written?)" : "");
      }
    }
  }
}

}  // namespace onecat
