// CPU reference of the gemm family (the oracle for GPU checks and the tuner):
//   y[M][N_out] = epilogue(x[M][K] · W[N][K]ᵀ), W decoded from the kernel layout of its format
// (docs/gemm.md) and every product summed in fp64. y is float; rounding it to fp16 is the
// caller's business, as is comparing with the family's tolerance.
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/weight_format.h"

namespace onecat::cpu {

struct GemmEpilogue {
  enum Kind {
    kNone,
    kBias,      // y = acc + bias[n]
    kResidual,  // y = acc + residual[m][n]
    kSiluMul,   // W is gate|up stacked along N (N even); y[m][j] = silu(acc[m][j]) · acc[m][N/2 + j]
  } kind = kNone;
  const uint16_t* bias = nullptr;      // fp16 [N]
  const uint16_t* residual = nullptr;  // fp16 [M][N]
};

// W[N][K] as float, from the kernel layout. For gptq act-order this is the packed column
// order (column k' is original column perm[k']). Throws Error if the tensors' sizes do not
// match the format and shape.
std::vector<float> dequantize(const quant::PackedWeight& w);

// x: fp16 [M][K] in original column order (for gptq act-order the op reads x[perm[k']]);
// y: [M][N], or [M][N/2] for kSiluMul. Throws Error on a missing epilogue operand or an odd N
// with kSiluMul.
void gemm(const quant::PackedWeight& w, const uint16_t* x, int64_t m, const GemmEpilogue& epi, float* y);

}  // namespace onecat::cpu
