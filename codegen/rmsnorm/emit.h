// rmsnorm: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order: half* out, const half* x, half* residual (in/out; null when
// residual=0), const half* weight, float eps, int rows.
#pragma once
#include <cstdint>

#include "codegen/family.h"
#include "codegen/rmsnorm/config.h"
#include "codegen/rmsnorm/spec.h"

namespace onecat::rmsnorm {

inline constexpr int kGeneratorVersion = 1;

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t rows);
// The byte alignment every pointer argument needs (one vector access).
inline int pointer_alignment(const Config& config) { return config.vec * 2; }

}  // namespace onecat::rmsnorm
