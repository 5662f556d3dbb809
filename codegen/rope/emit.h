// rope: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order: const half* qkv, const int* positions, const float* inv_freq,
// float attention_factor, const half* q_norm, const half* k_norm, float eps, half* q,
// void* k, void* v (dense outputs or the K and V caches), const int* slot_mapping,
// const float* k_scale, const float* v_scale, int tokens.
#pragma once
#include <cstdint>

#include "codegen/family.h"
#include "codegen/rope/config.h"
#include "codegen/rope/spec.h"

namespace onecat::rope {

inline constexpr int kGeneratorVersion = 1;

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t tokens);
// The byte alignment qkv, q and dense k/v need (one vector access; rows are dim·2 bytes apart).
inline int pointer_alignment(const Config& config) { return config.vec * 2; }

}  // namespace onecat::rope
