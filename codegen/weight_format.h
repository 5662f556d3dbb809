// Weight formats of the gemm family and the packed (kernel-layout) weight every strategy of
// that family reads (docs/gemm.md, "Kernel layouts"; ARCHITECTURE.md, rule 7).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace onecat::quant {

enum class WeightFormat { kF16, kAwq4, kGptq4, kFp8B32, kFp8B128, kNvfp4, kMxfp4 };

// The names of the formats in specs and messages: f16 awq4 gptq4 fp8b32 fp8b128 nvfp4 mxfp4.
WeightFormat parse_weight_format(std::string_view name);  // throws InputError naming the choices
std::string_view format_name(WeightFormat format);

// awq4 and gptq4: 4-bit integer codes with fp16 scales and zero points per group.
inline bool is_int4(WeightFormat format) { return format == WeightFormat::kAwq4 || format == WeightFormat::kGptq4; }

// W[N][K] in the kernel layout of its format; all multi-byte values little-endian.
struct PackedWeight {
  WeightFormat format = WeightFormat::kF16;
  int64_t n = 0, k = 0;
  // Block length along K: int4 G (32, 64 or 128); fp8b32 32; fp8b128 128, or 0 for per-channel
  // scales; nvfp4 16; mxfp4 32; f16 0.
  int group = 0;
  // f16: [N][K] fp16 · int4, nvfp4, mxfp4: [N][K/8] u32 of interleaved codes · fp8: [N][K] E4M3.
  std::vector<uint8_t> qweight;
  // int4: [N][K/G] fp16 · fp8b32: [⌈N/32⌉][K/32] i8 exponents · fp8b128: f32 blocks or [N] ·
  // nvfp4: [N][K/16] E4M3 · mxfp4: [N][K/32] UE8M0 · f16: empty.
  std::vector<uint8_t> scales;
  std::vector<uint8_t> zeros;  // int4 only: [N][K/G] fp16 integer zero points
  std::vector<int32_t> perm;   // gptq act-order only: packed column k' holds original column perm[k']
  float global_scale = 1.f;    // nvfp4 only

  // Weight bytes a kernel moves per pass (perm is per column, not per weight, and excluded).
  size_t bytes() const { return qweight.size() + scales.size() + zeros.size(); }
};

}  // namespace onecat::quant
