#include "tuner/output_compare.h"

#include <cmath>
#include <cstring>

#include "base/half.h"
#include "runtime/cpu/parallel.h"

namespace onecat {
namespace {

constexpr int64_t kChunk = int64_t(1) << 16;

}  // namespace

OutputDiff compare_outputs(const uint8_t* got, bool got_f32, const float* want, int64_t rows, int64_t cols,
                           ElementBound bound) {
  const int64_t count = rows * cols;
  std::vector<double> row_limit(size_t(std::max<int64_t>(rows, 0)));
  cpu::parallel_chunks(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double sum2 = 0;
      for (int64_t c = 0; c < cols; ++c) sum2 += double(want[size_t(r * cols + c)]) * want[size_t(r * cols + c)];
      row_limit[size_t(r)] = bound.row_rms_factor * std::sqrt(sum2 / double(std::max<int64_t>(cols, 1)));
    }
  });
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<OutputDiff> part(size_t(std::max<int64_t>(chunks, 1)));
  cpu::parallel_chunks(count, kChunk, [&](int64_t begin, int64_t end) {
    OutputDiff& d = part[size_t(begin / kChunk)];
    for (int64_t i = begin; i < end; ++i) {
      double g;
      if (got_f32) {
        float f;
        std::memcpy(&f, got + 4 * i, 4);
        g = f;
      } else {
        uint16_t h;
        std::memcpy(&h, got + 2 * i, 2);
        g = cpu::half_to_float(h);
      }
      if (!std::isfinite(g) && d.first_nonfinite < 0) d.first_nonfinite = i, d.nonfinite_value = g;
      const double ref = want[size_t(i)];
      d.diff2 += (g - ref) * (g - ref);
      d.ref2 += ref * ref;
      const double limit = row_limit[size_t(i / cols)] + bound.relative * std::abs(ref);
      if (std::isfinite(g) && !(std::abs(g - ref) <= limit)) {
        if (d.elements_over++ == 0) d.first_over = i, d.first_over_got = g, d.first_over_want = ref, d.first_over_limit = limit;
      }
    }
  });
  OutputDiff total;
  for (const OutputDiff& d : part) {  // in chunk order: the same sums on every run
    total.diff2 += d.diff2;
    total.ref2 += d.ref2;
    if (total.first_nonfinite < 0 && d.first_nonfinite >= 0) {
      total.first_nonfinite = d.first_nonfinite, total.nonfinite_value = d.nonfinite_value;
    }
    if (total.first_over < 0 && d.first_over >= 0) {
      total.first_over = d.first_over, total.first_over_got = d.first_over_got;
      total.first_over_want = d.first_over_want, total.first_over_limit = d.first_over_limit;
    }
    total.elements_over += d.elements_over;
  }
  return total;
}

std::vector<float> round_to_half(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  cpu::parallel_chunks(int64_t(v.size()), kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[size_t(i)] = cpu::half_to_float(cpu::float_to_half(v[size_t(i)]));
  });
  return out;
}

}  // namespace onecat
