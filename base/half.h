// Host-side IEEE binary16 conversions, bit-exact with the GPU's cvt.rn.f16.f32.
#pragma once
#include <cstdint>

namespace onecat::cpu {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even; overflow → ±inf; NaN stays NaN

}  // namespace onecat::cpu
