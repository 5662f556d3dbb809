// FP4 E2M1 (OCP MX, NVFP4): 1 sign bit (bit 3), 2 exponent bits, 1 mantissa bit; the
// magnitudes of codes 0..7 are {0, 0.5, 1, 1.5, 2, 3, 4, 6}; no infinity, no NaN.
#pragma once
#include <cmath>
#include <cstdint>

namespace onecat::quant {

inline constexpr float kE2m1Magnitudes[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};

inline float e2m1_to_float(uint8_t code) {
  const float magnitude = kE2m1Magnitudes[code & 0x7];
  return (code & 0x8) ? -magnitude : magnitude;
}

// Rounds to the nearest E2M1 value, ties to the even code (even mantissa bit); magnitudes
// beyond 6 saturate to ±6 (there is no infinity); NaN becomes +0.
inline uint8_t float_to_e2m1(float value) {
  if (std::isnan(value)) return 0;
  const uint8_t sign = std::signbit(value) ? 0x8 : 0x0;
  const float a = std::fabs(value);
  if (a >= 6.f) return sign | 0x7;
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; ++c) {
    const float d = std::fabs(a - kE2m1Magnitudes[c]);
    const float best_d = std::fabs(a - kE2m1Magnitudes[best]);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c;
  }
  return sign | best;
}

}  // namespace onecat::quant
