// CPU reference of the rope family (docs/rope.md), the oracle for GPU checks and the tuner:
// rotary position embedding, NeoX style (rotate-half), optionally after Qwen3's per-head q/k
// RMSNorm, plus the frequency table every backend reads.
#pragma once
#include <cstdint>
#include <vector>

namespace onecat::cpu {

struct RopeParams {  // transformers' rope_parameters / rope_scaling
  enum class Scaling { kNone, kLinear, kLlama3, kYarn };
  Scaling scaling = Scaling::kNone;
  double theta = 10000;
  double factor = 1;                                 // linear, llama3, yarn
  double low_freq_factor = 1, high_freq_factor = 4;  // llama3
  int64_t original_max_position = 0;                 // llama3, yarn (original_max_position_embeddings)
  double beta_fast = 32, beta_slow = 1;              // yarn
  double attention_factor = 0;                       // yarn: 0 = transformers' default (0.1·ln(factor) + 1)
  double mscale = 0, mscale_all_dim = 0;             // yarn (DeepSeek style), 0 = unset
  bool truncate = true;                              // yarn
};

// What the kernels read: inv_freq [dim/2] (fp32, as transformers computes it) and the factor
// cos and sin are multiplied by (yarn's attention factor, else 1).
struct RopeTable {
  std::vector<float> inv_freq;
  float attention_factor = 1.f;
};

// transformers' ROPE_INIT_FUNCTIONS (default, linear, llama3, yarn) for a rotary dim `dim`,
// step for step in fp32 as torch evaluates them (the powers base^(2i/dim) are correctly
// rounded here; torch's vectorised powf may differ from them in the last bit). Bad parameters
// (odd dim, theta ≤ 0, factor ≤ 0, a missing original_max_position, llama3's equal
// frequency factors) are an InputError.
RopeTable rope_table(const RopeParams& params, int dim);

// qkv: fp16 [tokens][(heads + 2·kv_heads)·dim] (bias already added). Writes q [tokens][heads][dim],
// k and v [tokens][kv_heads][dim] fp16: q and k first RMSNormed per head when q_norm/k_norm
// (fp16 [dim] weights) are given (Qwen3), then rotated NeoX-style (rotate-half) at positions[t];
// v copied.
void rope_qkv(const uint16_t* qkv, const int* positions, int64_t tokens, int heads, int kv_heads, int dim,
              const RopeTable& table, const uint16_t* q_norm, const uint16_t* k_norm, float eps, uint16_t* q,
              uint16_t* k, uint16_t* v);

// One head vector (fp16 [dim]) through the same steps as rope_qkv: RMSNorm when `norm` is not
// null, then the rotation at `position`; out may not alias x.
void rope_head(const uint16_t* x, int position, int dim, const RopeTable& table, const uint16_t* norm, float eps,
               uint16_t* out);

}  // namespace onecat::cpu
