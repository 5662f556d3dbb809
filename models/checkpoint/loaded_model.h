// A Hugging Face checkpoint loaded into host memory in the layouts the kernels read: every
// linear layer packed once (models/quant/pack.h), q|k|v and gate|up fused, norms and
// embeddings fp16. Ready for a GPU upload or the CPU forward pass (docs/checkpoint.md).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/weight_format.h"
#include "models/config.h"

namespace onecat::models {

// One expert of a mixture-of-experts layer, in the dense MLP's layouts.
struct LoadedExpert {
  quant::PackedWeight gate_up;  // [2·moe_intermediate][hidden]: gate rows then up rows
  quant::PackedWeight down;     // [hidden][moe_intermediate]
};

struct LoadedLayer {
  std::vector<uint16_t> input_norm;           // [hidden] fp16
  quant::PackedWeight qkv;                    // [(heads + 2·kv_heads)·head_dim][hidden]: q rows, k rows, v rows
  std::vector<uint16_t> qkv_bias;             // [(heads + 2·kv_heads)·head_dim] when attention_bias, else empty
  std::vector<uint16_t> q_norm, k_norm;       // [head_dim] per-head RMSNorm (Qwen3), else empty
  quant::PackedWeight o;                      // [hidden][heads·head_dim]
  std::vector<uint16_t> o_bias;               // [hidden] for Llama with attention_bias, else empty
  std::vector<uint16_t> post_attention_norm;  // [hidden]
  quant::PackedWeight gate_up;                // [2·intermediate][hidden]: gate rows then up rows (epi=silu_mul)
  quant::PackedWeight down;                   // [hidden][intermediate]
  // (A MoE layer with a shared expert, Qwen2-MoE: gate_up and down above are the shared
  // expert's, of width shared_intermediate, and shared_gate its gate, [1][hidden].)
  quant::PackedWeight shared_gate;
  // Mixture of experts (Qwen3-MoE; gate_up and down above stay empty but for a shared expert): the router mlp.gate,
  // [experts][hidden] (16-bit in every published checkpoint, packed as the checkpoint has it),
  // and every expert's weights, by expert id.
  quant::PackedWeight router;
  std::vector<LoadedExpert> experts;
  // The checkpoint's calibrated scales for an fp8 KV cache (cached code = value / scale), as
  // llm-compressor (self_attn.k_scale) or ModelOpt (self_attn.k_proj.k_scale) write them;
  // 1 without. An fp16 cache ignores them.
  float k_scale = 1.f, v_scale = 1.f;
};

struct LoadedModel {
  ModelConfig config;
  std::vector<uint16_t> embed_tokens;  // [vocab][hidden] fp16
  std::vector<LoadedLayer> layers;
  std::vector<uint16_t> final_norm;            // [hidden]
  std::optional<quant::PackedWeight> lm_head;  // [vocab][hidden]; absent when tied to embed_tokens
  size_t checkpoint_bytes = 0;                 // tensor bytes read
  double load_seconds = 0;

  double load_bytes_per_second() const { return load_seconds > 0 ? double(checkpoint_bytes) / load_seconds : 0; }
};

struct LoadOptions {
  bool progress = true;  // a progress bar on stderr
};

// Reads config.json (and hf_quant_config.json) and the safetensors of `directory`, checks
// every tensor against the config and packs it. Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE and Qwen2-MoE; anything else,
// and any malformed or mismatched tensor, is an InputError of one sentence naming the file
// and the tensor.
LoadedModel load_checkpoint(const std::string& directory, const LoadOptions& options = {});

}  // namespace onecat::models
