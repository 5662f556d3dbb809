#include "base/e4m3.h"

#include <cmath>
#include <limits>

namespace onecat::quant {

float e4m3_to_float(uint8_t code) {
  if (e4m3_is_nan(code)) return std::numeric_limits<float>::quiet_NaN();
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  // Subnormal: m · 2^-9; normal: (1 + m/8) · 2^(e-7) = (8 + m) · 2^(e-10).
  const float magnitude =
      exponent == 0 ? std::ldexp(float(mantissa), -9) : std::ldexp(float(8 + mantissa), exponent - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

uint8_t float_to_e4m3(float value) {
  if (std::isnan(value)) return 0x7F;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const double a = std::fabs(double(value));
  if (a < std::ldexp(1.0, -6)) {
    // Subnormal range, units of 2^-9; q == 8 carries into the smallest normal, whose
    // encoding (exponent 1, mantissa 0) is exactly 8.
    return sign | uint8_t(std::nearbyint(std::ldexp(a, 9)));
  }
  if (a > 464.0) return sign | 0x7F;  // 464 = 448 + half an ulp: ties go to 448 (even)
  int e2;
  std::frexp(a, &e2);  // a in [2^(e2-1), 2^e2)
  int exponent = e2 - 1;
  int q = int(std::nearbyint(std::ldexp(a, 3 - exponent)));  // in [8, 16]
  if (q == 16) {
    q = 8;
    ++exponent;
  }
  return sign | uint8_t(((exponent + 7) << 3) | (q - 8));
}

}  // namespace onecat::quant
