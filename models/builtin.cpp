// Built-in model configs (shapes only, no weights), copied from the public config.json of
// each checkpoint (Qwen/Qwen3-8B, meta-llama/Llama-3.1-8B, Qwen/Qwen3-32B,
// Qwen/Qwen3-30B-A3B, mistralai/Mixtral-8x7B-v0.1, microsoft/phi-4, Qwen/Qwen2.5-7B-Instruct), with the quantised forms
// onecat's gemm family reads.
#include <utility>

#include "base/error.h"
#include "models/config.h"

namespace onecat::models {
namespace {

ModelConfig dense(std::string name, std::string arch, int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                  int64_t kv_heads, int64_t vocab, double eps, bool qk_norm) {
  ModelConfig m;
  m.name = std::move(name);
  m.architecture = std::move(arch);
  m.hidden = hidden;
  m.intermediate = intermediate;
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = 128;
  m.vocab = vocab;
  m.rms_norm_eps = eps;
  m.tie_word_embeddings = false;
  m.qk_norm = qk_norm;
  m.attention_bias = false;
  m.rope.theta = 1e6;  // the Qwen3 models'
  m.max_position_embeddings = 40960;
  return m;
}

std::vector<ModelConfig> base_models() {
  std::vector<ModelConfig> out;
  out.push_back(dense("qwen3-8b", "Qwen3ForCausalLM", 4096, 12288, 36, 32, 8, 151936, 1e-6, true));
  ModelConfig llama = dense("llama-3.1-8b", "LlamaForCausalLM", 4096, 14336, 32, 32, 8, 128256, 1e-5, false);
  llama.rope = {.scaling = cpu::RopeParams::Scaling::kLlama3,
                .theta = 500000,
                .factor = 8,
                .low_freq_factor = 1,
                .high_freq_factor = 4,
                .original_max_position = 8192};
  llama.max_position_embeddings = 131072;
  out.push_back(llama);
  out.push_back(dense("qwen3-32b", "Qwen3ForCausalLM", 5120, 25600, 64, 64, 8, 151936, 1e-6, true));
  // intermediate_size 6144 is in its config.json but unused: every layer is a MoE layer.
  ModelConfig moe = dense("qwen3-30b-a3b", "Qwen3MoeForCausalLM", 2048, 6144, 48, 32, 4, 151936, 1e-6, true);
  moe.experts = 128;
  moe.experts_per_token = 8;
  moe.moe_intermediate = 768;
  moe.norm_topk_prob = true;
  out.push_back(moe);
  // Every layer 8 experts of intermediate_size 14336, 2 per token, always renormalised.
  ModelConfig mixtral = dense("mixtral-8x7b", "MixtralForCausalLM", 4096, 14336, 32, 32, 8, 32000, 1e-5, false);
  mixtral.max_position_embeddings = 32768;
  mixtral.experts = 8;
  mixtral.experts_per_token = 2;
  mixtral.moe_intermediate = 14336;
  mixtral.norm_topk_prob = true;
  out.push_back(mixtral);
  // Phi-3's architecture at 14B: q|k|v and gate|up published fused, 40 heads over 10 KV heads.
  ModelConfig phi4 = dense("phi-4", "Phi3ForCausalLM", 5120, 17920, 40, 40, 10, 100352, 1e-5, false);
  phi4.rope.theta = 250000;
  phi4.max_position_embeddings = 16384;
  out.push_back(phi4);
  // Qwen2.5-7B: 28 heads over 4 KV heads (GQA 7), q/k/v biases, head_dim 128.
  ModelConfig qwen25 = dense("qwen2.5-7b", "Qwen2ForCausalLM", 3584, 18944, 28, 28, 4, 152064, 1e-6, false);
  qwen25.attention_bias = true;
  qwen25.max_position_embeddings = 32768;
  out.push_back(qwen25);
  return out;
}

const std::vector<std::pair<std::string, QuantConfig>>& quant_forms() {
  static const std::vector<std::pair<std::string, QuantConfig>> forms = {
      {"", {}},
      {"awq4", {QuantConfig::kAwq, 4, 128, false, false, 0, 0}},  // AutoAWQ: zero_point true
      {"gptq4", {QuantConfig::kGptq, 4, 128, false, true, 0, 0}},
      {"fp8", {QuantConfig::kFp8Block, 8, 128, false, true, 128, 128}},
      {"nvfp4", {QuantConfig::kNvfp4, 4, 16, false, true, 0, 0}},
      {"mxfp4", {QuantConfig::kMxfp4, 4, 32, false, true, 0, 0}},
  };
  return forms;
}

}  // namespace

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const auto& m : base_models()) {
    for (const auto& [suffix, q] : quant_forms()) names.push_back(suffix.empty() ? m.name : m.name + ":" + suffix);
  }
  return names;
}

ModelConfig builtin_model(const std::string& name) {
  for (ModelConfig m : base_models()) {
    for (const auto& [suffix, q] : quant_forms()) {
      const std::string full = suffix.empty() ? m.name : m.name + ":" + suffix;
      if (full == name) {
        m.name = full;
        m.quant = q;
        return m;
      }
    }
  }
  std::string known;
  for (const auto& n : builtin_model_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown built-in model " + quoted_input(name) + " (known: " + known + ").");
}

}  // namespace onecat::models
