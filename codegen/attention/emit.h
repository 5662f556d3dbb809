// attention: Spec + Config → source, kernel name expression, launch geometry, workspace.
//
// prefill / decode / verify kernel arguments, in order (docs/attention.md):
//   half* out [tokens][heads][dim], const half* q [tokens][heads][dim],
//   const void* k_cache, const void* v_cache ([pages][kv_heads][page][dim], fp16 or fp8),
//   const float* k_scale, const float* v_scale (fp8: [1] or [kv_heads]; f16: null),
//   const int* block_table [batch][max_pages], int max_pages, const int* seq_lens [batch],
//   const int* cu_q [batch + 1] (prefill; null otherwise), float sm_scale,
//   float* partial, int* counters (split > 1: workspace_floats / workspace_counters; counters
//   zeroed once when allocated, the kernel leaves them zero).
// kv_write kernel arguments: void* k_cache, void* v_cache, const half* k [tokens][kv_heads][dim],
//   const half* v, const int* slot_mapping [tokens], const float* k_scale, const float* v_scale,
//   int tokens.
#pragma once
#include <cstdint>

#include "codegen/attention/config.h"
#include "codegen/attention/spec.h"
#include "codegen/family.h"

namespace onecat::attention {

inline constexpr int kGeneratorVersion = 4;  // 2: atom=m16n8k16 (attention_sm80.cuh); 3: its cheaper stage issue and O rescale (configs rank anew); 4: the split merge reads all splits at once, and a short context runs on fewer splits

Emitted emit(const Spec& spec, const Config& config, Arch arch);
// batch: sequences (kv_write: tokens); max_q: the longest query count of the batch (prefill;
// decode and verify take the spec's).
LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t batch, int64_t max_q = 0);
// Split-KV workspace for `batch` sequences (0 when split = 1).
int64_t workspace_floats(const Spec& spec, const Config& config, int64_t batch);
int64_t workspace_counters(const Spec& spec, const Config& config, int64_t batch);

}  // namespace onecat::attention
