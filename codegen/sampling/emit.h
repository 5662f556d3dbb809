// sampling: Spec + Config → source, kernel name expression, launch geometry.
// Kernel arguments, in order (op.h packs them):
//   sample: int* tokens, float* token_logprobs, int* top_ids, float* top_logprobs,
//           const float* logits, const RowParams* params, const int* history_offsets,
//           const int* history_ids, int* history_table
//   argmax: int* tokens, const float* logits, u64* partials, unsigned* counters
#pragma once
#include <cstdint>

#include "codegen/family.h"
#include "codegen/sampling/config.h"
#include "codegen/sampling/spec.h"

namespace onecat::sampling {

inline constexpr int kGeneratorVersion = 1;

Emitted emit(const Spec& spec, const Config& config, Arch arch);
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t rows);
// The byte alignment the logits need: argmax with vec=4 loads 16 bytes at a time.
inline int logits_alignment(const Config& config) { return config.op == Op::kArgmax && config.vec == 4 ? 16 : 4; }

}  // namespace onecat::sampling
