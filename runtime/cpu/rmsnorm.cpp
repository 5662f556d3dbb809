#include "runtime/cpu/rmsnorm.h"

#include <cmath>
#include <vector>

#include "base/half.h"

namespace onecat::cpu {

void rmsnorm(uint16_t* out, const uint16_t* x, uint16_t* residual, const uint16_t* weight, float eps, int64_t rows,
             int64_t hidden) {
  std::vector<double> s(static_cast<size_t>(hidden));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * hidden;
    double sum_sq = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      float v = half_to_float(x[base + i]);
      if (residual) {
        uint16_t sum = float_to_half(v + half_to_float(residual[base + i]));
        residual[base + i] = sum;
        v = half_to_float(sum);
      }
      s[i] = v;
      sum_sq += double(v) * v;
    }
    const double inv_rms = 1.0 / std::sqrt(sum_sq / double(hidden) + double(eps));
    for (int64_t i = 0; i < hidden; ++i) {
      out[base + i] = float_to_half(float(s[i] * inv_rms * half_to_float(weight[i])));
    }
  }
}

}  // namespace onecat::cpu
