// moe: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order (codegen/moe/op.cpp packs them):
//   route:   int* ids, float* weights, int* offsets, int* sorted, const half* logits, int tokens,
//            const float* bias, float scale, int* workspace
//   gate_up, down: void* y, const half* x, qweight, scales, zeros, const int* perm,
//            const float* global_scales, const int* offsets, const int* sorted, const int* slot,
//            long long qweight_stride, scales_stride, zeros_stride (bytes per expert)
//   combine: half* out, const float* y, const float* weights, int tokens, const half* shared,
//            const half* shared_gate
//   decode:  half* out, const half* x, const half* logits, int tokens, const float* bias, float scale,
//            gate_up's qweight, scales, zeros, perm, global_scales, qweight_stride, scales_stride,
//            zeros_stride, then down's, half* h, float* y, const half* shared, const half* shared_gate,
//            int* ids, float* weights, unsigned* workspace
#pragma once
#include <cstdint>

#include "codegen/family.h"
#include "codegen/moe/config.h"
#include "codegen/moe/spec.h"

namespace onecat::moe {

inline constexpr int kGeneratorVersion = 3;  // 2: strategy=tc_small (configs rank anew); 3: occ

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t tokens);
// gate_up and down: the grid's tiles for `pairs` pairs (tokens × topk): the most any routing
// needs (each touched expert's pairs in tiles of the config's pairs; the experts touched are
// at most min(experts, pairs)).
int64_t max_tiles(const Spec& spec, const Config& config, int64_t pairs);

}  // namespace onecat::moe
