// CPU reference of the rmsnorm family (the oracle for GPU checks and the tuner).
// Same definition as templates/rmsnorm/rmsnorm.cuh, computed in fp64:
//   s = residual ? fp16(x + residual) : x;   residual <- s
//   out = fp16(s / sqrt(mean(s^2) + eps) * weight)
#pragma once
#include <cstdint>

namespace onecat::cpu {

void rmsnorm(uint16_t* out, const uint16_t* x, uint16_t* residual /* nullable */, const uint16_t* weight, float eps,
             int64_t rows, int64_t hidden);

}  // namespace onecat::cpu
