// gemm spec: y[M,N] = x[M,K] · W[N,K]^T, everything but M fixed at compile time.
//   gemm:n=4096,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0
// group, out, epi and act_order may be omitted (defaults: the format's usual group, f16,
// none, 0); the canonical form prints every field. group=0 means "none" (f16) or per-channel
// scales (fp8b128). epi=silu_mul takes W = [gate; up] with n = 2 × the output width.
// norm=rms: x is the residual stream and y = epi(RMSNorm(x) · Wᵀ), the norm's weight [k] and
// eps given at launch (a decode step's norm fused into the gemv that reads it: strategy=gemv
// only). The canonical form prints norm only when it is set, so every other spec keeps its text
// (and its cache keys).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "codegen/weight_format.h"

namespace onecat::gemm {

using quant::WeightFormat;

enum class Epilogue { kNone = 0, kBias = 1, kResidual = 2, kSiluMul = 3 };  // values match templates/gemm/epilogue.cuh

struct Spec {
  int64_t n = 0;  // weight rows (2 × output width for silu_mul)
  int64_t k = 0;
  WeightFormat format = WeightFormat::kF16;
  int group = 0;
  bool out_f32 = false;
  Epilogue epilogue = Epilogue::kNone;
  bool act_order = false;  // gptq4 desc_act: x is read through the K permutation
  bool norm = false;       // norm=rms: RMSNorm of x first (above)

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  int64_t out_cols() const { return epilogue == Epilogue::kSiluMul ? n / 2 : n; }
  // k values per 16-byte chunk of a weight row (the unit every strategy loads).
  int per_chunk() const;
  friend bool operator==(const Spec&, const Spec&) = default;
};

std::string_view epilogue_name(Epilogue e);

}  // namespace onecat::gemm
