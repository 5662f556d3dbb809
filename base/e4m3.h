// FP8 E4M3 ("fn" variant, as in torch.float8_e4m3fn and OCP FP8): 1 sign, 4 exponent bits
// with bias 7, 3 mantissa bits; no infinity; 0x7F and 0xFF are NaN; largest finite ±448.
#pragma once
#include <cstdint>

namespace onecat::quant {

inline constexpr float kE4m3Max = 448.f;

inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

// Exact: every E4M3 value is a float. NaN codes give a quiet NaN.
float e4m3_to_float(uint8_t code);

// Rounds to the nearest E4M3 value, ties to even. Like torch's conversion it does not
// saturate: a magnitude that rounds above 448 (> 464) becomes the NaN code, as does NaN.
uint8_t float_to_e4m3(float value);

}  // namespace onecat::quant
