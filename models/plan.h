// Per-rank kernel plan of a model under tensor parallelism: every op one forward pass runs
// on one rank, with its canonical kernel spec where a kernel family exists for it, and
// listed without a spec (never dropped) where none exists yet.
//
// Sharding (Megatron style): q/k/v and gate/up are column-parallel, o_proj and down are
// row-parallel (their f32 partial sums are all-reduced), lm_head is column-parallel over the
// vocabulary (rounded up), norms and the MoE router are replicated. When kv_heads < tp the
// KV heads are replicated: each rank holds max(1, kv_heads / tp) of them (tp must then be a
// multiple of kv_heads). Attention ops (kv_write, prefill, decode, verify with 8 query tokens)
// read a paged KV cache of 16-token pages (fp16, or fp8 with one scale per tensor: KvCacheDtype)
// with the model's sliding window; a head shape the attention family has no kernel for is
// listed without a spec, with the reason.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/arch.h"
#include "models/config.h"

namespace onecat::models {

struct PlannedOp {
  std::string name;                 // e.g. "layers.qkv_proj"
  std::string family;               // "gemm", "rmsnorm", "attention", or one without kernels yet:
                                    // "moe", "embedding", "rope", "sampling", "allreduce"
  std::optional<std::string> spec;  // canonical spec when the family exists
  std::string note;                 // sharding, shapes, or "no kernel family yet: …"
  int64_t count_per_rank = 0;       // how many times it runs per forward pass
  int64_t max_tokens = 0;           // runs only in steps of at most this many tokens (0: any)
};
// The most tokens a decode step fuses its norms at (the gemv's range on sm_70; sm_80+ stops
// sooner: codegen/gemm/space.h gemv_default_max_m): the fused gemm ops' max_tokens.
inline constexpr int64_t kFusedNormMaxTokens = 16;
// Whether the GPU forward fuses its decode steps' norms (model::GpuBackend::fuses_norms): off,
// though the fused step passes its GPU checks, because it measured slower (each CTA of the fused
// gemv redoes the row's reduction: bench/RESULTS.md, "Tried and lost"). The plan lists (and tune
// tunes) the fused gemms only when it is on.
inline constexpr bool kGpuFusesNorms = false;

// The KV cache's element type, as vLLM's --kv-cache-dtype names it: auto (fp16), fp8 or
// fp8_e4m3 (E4M3), fp8_e5m2 (E5M2); fp8 caches carry one scale per tensor (kv_scale=tensor).
enum class KvCacheDtype { kF16, kE4m3, kE5m2 };
// Parses those names (and f16, e4m3, e5m2); InputError listing them otherwise.
KvCacheDtype parse_kv_cache_dtype(const std::string& text);
// The cache's type and scale as attention and rope specs spell them: "f16", "e4m3,kv_scale=tensor"
// or "e5m2,kv_scale=tensor".
std::string kv_cache_spec_text(KvCacheDtype kv);
// The type as people read it: "fp16", "fp8_e4m3" or "fp8_e5m2".
inline const char* kv_cache_dtype_name(KvCacheDtype kv) {
  return kv == KvCacheDtype::kF16 ? "fp16" : kv == KvCacheDtype::kE4m3 ? "fp8_e4m3" : "fp8_e5m2";
}
// Bytes per cached element: 2 (f16) or 1 (fp8).
inline int kv_cache_element_bytes(KvCacheDtype kv) { return kv == KvCacheDtype::kF16 ? 2 : 1; }

// tp: 1, 2, 4 or 8. Throws InputError naming the dimension and tp when a dimension does not
// shard, and the op when its family rejects a shape.
// The most tokens the GPU forward on `arch` fuses a decode step's norms at: kFusedNormMaxTokens
// capped by the gemv's range there (0 while kGpuFusesNorms is off).
int64_t gpu_fused_norm_max_tokens(Arch arch);

// fused_max_tokens: list a dense tp-1 model's decode-step fused gemms too, with that max_tokens
// (what a forward that fuses norms runs: gpu_fused_norm_max_tokens for a GPU's; 0: none).
std::vector<PlannedOp> plan_model(const ModelConfig& model, int tp, KvCacheDtype kv = KvCacheDtype::kF16,
                                  int64_t fused_max_tokens = kGpuFusesNorms ? kFusedNormMaxTokens : 0);

// The specs of a plan, each once, in first-seen order.
std::vector<std::string> unique_specs(const std::vector<PlannedOp>& plan);
// The most tokens `spec` runs at in the plan (0: any).
int64_t spec_max_tokens(const std::vector<PlannedOp>& plan, const std::string& spec);

}  // namespace onecat::models
