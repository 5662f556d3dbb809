// embedding: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order: half* out, const half* table, const int* ids, int vocab_start,
// int tokens.
#pragma once
#include <cstdint>

#include "codegen/embedding/config.h"
#include "codegen/embedding/spec.h"
#include "codegen/family.h"

namespace onecat::embedding {

inline constexpr int kGeneratorVersion = 1;

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t tokens);
// The byte alignment the table and output need (one vector access).
inline int pointer_alignment(const Config& config) { return config.vec * 2; }

}  // namespace onecat::embedding
