// Packers: checkpoint tensors of each weight format → PackedWeight in the kernel layout
// (docs/gemm.md has both layouts). Each takes the logical shape N (out features) × K (in
// features) and the checkpoint tensors as flat row-major spans; it validates every size and
// value the kernel relies on and throws InputError with a sentence naming the tensor, the
// expected shape and the offending block. The caller adds the layer name when it rethrows.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "codegen/weight_format.h"

namespace onecat::quant {

// f16: weight [N][K] fp16 bits.
PackedWeight pack_f16(int64_t n, int64_t k, std::span<const uint16_t> weight);
// The same from the weight's little-endian bytes, taken over (the checkpoint loader reads into them).
PackedWeight pack_f16_bytes(int64_t n, int64_t k, std::vector<uint8_t> bytes);

// awq4, AutoAWQ GEMM: qweight [K][N/8] i32, qzeros [K/G][N/8] i32 (both packed along N in
// AutoAWQ's order), scales [K/G][N] fp16. N % 8 == 0, K % G == 0, G ∈ {32, 64, 128}.
PackedWeight pack_awq4(int64_t n, int64_t k, int group, std::span<const int32_t> qweight,
                       std::span<const int32_t> qzeros, std::span<const uint16_t> scales);

// gptq4, AutoGPTQ v1: qweight [K/8][N] i32, qzeros [K/G][N/8] i32 holding z − 1 (empty: the
// symmetric z = 8, and N is then free), scales [K/G][N] fp16, g_idx [K] i32 (empty or
// k/G everywhere: no act-order). Any other g_idx is act-order: columns are sorted by it
// (stably) and `perm` records the original column of each packed one.
PackedWeight pack_gptq4(int64_t n, int64_t k, int group, std::span<const int32_t> qweight,
                        std::span<const int32_t> qzeros, std::span<const uint16_t> scales,
                        std::span<const int32_t> g_idx);

// fp8b32: weight [N][K] E4M3, scales [⌈N/32⌉][K/32] as UE8M0 bytes (2^(b−127)) or as fp32
// values. Refuses E4M3 NaN codes and scales that are not 2^e with e ∈ [−14, 7] (the window in
// which every product is an exact fp16 value, VOLTA.md).
inline constexpr int kFp8b32MinExponent = -14;  // 2^-9 (least E4M3 step) · 2^-14 = 2^-23, above fp16's least 2^-24
inline constexpr int kFp8b32MaxExponent = 7;    // 448 · 2^7 = 57344 ≤ 65504, fp16's largest
PackedWeight pack_fp8b32(int64_t n, int64_t k, std::span<const uint8_t> weight, std::span<const uint8_t> scales_ue8m0);
PackedWeight pack_fp8b32(int64_t n, int64_t k, std::span<const uint8_t> weight, std::span<const float> scales);

// fp8b128 (DeepSeek-style): weight [N][K] E4M3, weight_scale_inv (a multiplier despite its
// name) [⌈N/128⌉][⌈K/128⌉] f32 for kBlock128 or [N] f32 for kPerChannel. Refuses E4M3 NaN
// codes and non-finite scales.
enum class Fp8Scales { kBlock128, kPerChannel };
PackedWeight pack_fp8b128(int64_t n, int64_t k, std::span<const uint8_t> weight,
                          std::span<const float> weight_scale_inv, Fp8Scales layout);

// nvfp4, ModelOpt: weight [N][K/2] u8 (low nibble = even k), weight_scale [N][K/16] E4M3,
// weight_scale_2 the per-tensor f32. Refuses E4M3 NaN scale codes and a non-finite
// weight_scale_2.
PackedWeight pack_nvfp4(int64_t n, int64_t k, std::span<const uint8_t> weight, std::span<const uint8_t> weight_scale,
                        float weight_scale_2);

// mxfp4, OCP MX (gpt-oss): blocks [N][K/2] u8 (low nibble = even k), scales [N][K/32] UE8M0.
// Refuses the NaN scale 255.
// The largest UE8M0 scale byte pack_mxfp4 takes: 2^13, so 6 · 2^13 = 49152 fits fp16.
inline constexpr uint8_t kMxfp4MaxScaleByte = 140;
PackedWeight pack_mxfp4(int64_t n, int64_t k, std::span<const uint8_t> blocks, std::span<const uint8_t> scales);

// Every output row of w times `factor` (a model's constant folded into its weight, Granite's
// residual_multiplier): f16 values and int4 group scales rounded to fp16, fp8b128 scales in
// f32, nvfp4's per-tensor scale. fp8b32 and mxfp4 hold powers of two only: an InputError, as is
// an fp16 value the product takes out of range. `what` names the weight in messages.
void scale_rows(PackedWeight& w, float factor, const std::string& what);
// `count` little-endian fp16 values at `halves` times `factor`, each rounded once; an InputError
// naming `what` when one leaves fp16's range (scale_rows, and a model's norms and embeddings).
void scale_halves(void* halves, size_t count, double factor, const std::string& what);

}  // namespace onecat::quant
