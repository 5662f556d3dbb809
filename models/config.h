// A model's architecture and weight quantisation as onecat needs them to plan kernels: read
// from a Hugging Face config.json (plus ModelOpt's hf_quant_config.json), or one of the
// built-in configs (shapes only, no weights) named like "qwen3-8b" or "qwen3-8b:awq4".
// Every malformed or unsupported input is an InputError of one sentence naming the file
// (origin) and the field.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cpu/rope.h"

namespace onecat::models {

struct QuantConfig {
  enum Method { kNone, kAwq, kGptq, kFp8Block, kNvfp4, kMxfp4 };
  Method method = kNone;
  int bits = 16;        // 16 (none), 4 (awq, gptq, nvfp4, mxfp4), 8 (fp8)
  int group_size = 0;   // int4: 32/64/128; nvfp4 16; mxfp4 32; fp8: block_k, 0 per channel; none 0
  bool desc_act = false;  // gptq act-order
  bool sym = true;        // gptq sym; awq: !zero_point
  int block_n = 0, block_k = 0;  // fp8: weight_block_size; both 0 for per-channel scales (fbgemm_fp8)
  // fp8 blocks: scale_fmt "ue8m0" (transformers' FineGrainedFP8Config): weight_scale_inv may hold
  // UE8M0 exponent bytes (F8_E8M0 or U8) as well as float powers of two.
  bool ue8m0_scales = false;
  // The compressed-tensors library's tensors (llm-compressor, quant_method "compressed-tensors"):
  // weight_packed / weight_scale / weight_zero_point / weight_g_idx / weight_global_scale in its
  // layouts, mapped onto the method above (W4A16 → gptq, FP8 → fp8 per channel or block 128,
  // NVFP4, MXFP4; docs/checkpoint.md).
  bool compressed_tensors = false;
  friend bool operator==(const QuantConfig&, const QuantConfig&) = default;
};

// "none", "awq", "gptq", "fp8", "nvfp4", "mxfp4".
std::string_view quant_method_name(QuantConfig::Method method);

struct ModelConfig {
  std::string name;
  // LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM,
  // Qwen2MoeForCausalLM, MixtralForCausalLM, Phi3ForCausalLM or GraniteForCausalLM.
  std::string architecture;
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qk_norm = false;         // Qwen3, Qwen3Moe: rmsnorm over head_dim on q and k
  bool attention_bias = false;  // Qwen2: bias on q, k and v
  int64_t sliding_window = 0;   // keys every layer attends to (use_sliding_window); 0: all
  // Rotary embedding: rope_theta and rope_scaling (transformers 4), or rope_parameters
  // (transformers 5); default, linear, llama3 or yarn.
  cpu::RopeParams rope;
  int64_t max_position_embeddings = 0;  // 0 when config.json does not say
  // Mixture of experts (Qwen3Moe, Qwen2Moe, Mixtral), 0 otherwise.
  int64_t experts = 0, experts_per_token = 0, moe_intermediate = 0;
  // Qwen2Moe: the shared expert's intermediate width (its output times sigmoid of a gate), 0: none.
  int64_t shared_intermediate = 0;
  // norm_topk_prob: the chosen experts' softmax weights divided by their sum (Qwen3-30B-A3B);
  // else the weights as the softmax over all experts gave them (transformers' default).
  bool norm_topk_prob = false;
  // Granite's multipliers (1 elsewhere): the embeddings times embedding_multiplier, each layer's
  // attention and MLP outputs times residual_multiplier before they join the residual, the
  // logits divided by logits_scaling — all folded into the weights at load (models/checkpoint)
  // — and attention_multiplier the softmax scale in place of 1/√head_dim (0: that default).
  double embedding_multiplier = 1, residual_multiplier = 1, logits_scaling = 1, attention_multiplier = 0;
  QuantConfig quant;

  bool is_moe() const { return experts > 0; }
  // The softmax scale of attention: attention_multiplier where the config sets one, else 1/√head_dim.
  float attention_scale() const;
  bool has_shared_expert() const { return shared_intermediate > 0; }
};

// A config.json's text; origin (its path) names the file in messages.
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);
// ModelOpt's hf_quant_config.json: {"quantization": {"quant_algo": "NVFP4", "group_size": 16, …}}.
QuantConfig parse_hf_quant_config(const std::string& json_text, const std::string& origin);

// A directory (config.json and, if present, hf_quant_config.json), a path to a config.json
// (with its sibling hf_quant_config.json, if present), or a built-in name.
ModelConfig load_model(const std::string& model);

// vLLM's quantization names (awq, awq_marlin, gptq, gptq_marlin, fp8, modelopt_fp4, nvfp4, mxfp4,
// none) checked against the method `config` (from `dir`) declares: InputError, naming both, when
// `given` asks for another or is none of them; "" passes. onecat converts no checkpoint.
void check_quantization(const std::string& given, const ModelConfig& config, const std::string& dir);

// Built-in configs (models/builtin.cpp): "qwen3-8b", "llama-3.1-8b", "qwen3-32b",
// "qwen3-30b-a3b", each also with ":awq4", ":gptq4", ":fp8", ":nvfp4" or ":mxfp4".
ModelConfig builtin_model(const std::string& name);  // InputError listing the known names
std::vector<std::string> builtin_model_names();

}  // namespace onecat::models
