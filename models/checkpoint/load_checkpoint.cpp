#include <atomic>
#include <exception>
#include <filesystem>

#include "base/error.h"
#include "models/checkpoint/checkpoint_files.h"
#include "models/checkpoint/linear.h"
#include "models/checkpoint/load_progress.h"
#include "models/checkpoint/loaded_model.h"
#include "models/checkpoint/tensor_values.h"
#include "models/quant/pack.h"
#include "runtime/cpu/parallel.h"

namespace onecat::models {
namespace {

const char* const kLoadable[] = {"LlamaForCausalLM",   "MistralForCausalLM",  "Qwen2ForCausalLM",
                                 "Qwen3ForCausalLM",   "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM",
                                 "MixtralForCausalLM", "Phi3ForCausalLM",     "GraniteForCausalLM"};

// Every tensor a linear layer of any format may have (models/checkpoint/linear.cpp).
const char* const kLinearTensors[] = {".weight", ".qweight", ".qzeros", ".scales", ".g_idx", ".weight_scale_inv",
                                      ".weight_scale", ".weight_scale_2", ".input_scale", ".blocks",
                                      // compressed-tensors
                                      ".weight_packed", ".weight_shape", ".weight_zero_point", ".weight_g_idx",
                                      ".weight_global_scale", ".input_global_scale"};

// Reads tensors by name against the config's shapes and counts the bytes for the progress bar.
class Reader {
 public:
  Reader(const CheckpointFiles& files, LoadProgress& progress) : files_(files), progress_(progress) {}

  std::vector<uint16_t> vector_f16(const std::string& name, int64_t length, const std::string& why) {
    const Tensor& t = files_.require(name);
    expect_shape(t, {length}, why);
    count(t);
    return read_f16(t);
  }

  std::vector<uint16_t> matrix_f16(const std::string& name, int64_t rows, int64_t cols, const std::string& why) {
    const Tensor& t = files_.require(name);
    expect_shape(t, {rows, cols}, why);
    count(t);
    return read_f16(t);
  }

  quant::PackedWeight linear(const std::string& prefix, int64_t n, int64_t k, const QuantConfig& quant) {
    quant::PackedWeight w = load_linear(files_, prefix, n, k, quant);
    count_linear(prefix);
    return w;
  }

  // The linears of `prefixes` (rows[i] out features each) stacked into one weight (load_stacked).
  quant::PackedWeight stacked(const std::vector<std::string>& prefixes, const std::vector<int64_t>& rows, int64_t k,
                              const QuantConfig& quant, const std::string& what) {
    quant::PackedWeight w = load_stacked(files_, prefixes, rows, k, quant, files_.directory() + ": layer " + what);
    for (const std::string& prefix : prefixes) count_linear(prefix);
    return w;
  }

  // An fp8 KV cache's scale of `which` ("k" or "v") under any of the names checkpoints use; 1
  // when none is there. One positive finite number, else an InputError naming the tensor.
  float kv_scale(const std::string& layer, const std::string& which) {
    for (const std::string& name : {layer + "self_attn." + which + "_scale",
                                    layer + "self_attn." + which + "_proj." + which + "_scale",
                                    layer + "self_attn." + which + "_proj.output_scale"}) {
      const Tensor* t = files_.find(name);
      if (!t) continue;
      if (t->elements() != 1) expect_shape(*t, {}, "a per-tensor KV cache scale");
      count(*t);
      const float s = read_f32(*t)[0];
      if (!(s > 0)) {
        throw InputError(*t->file + ": tensor " + name + " is " + std::to_string(s) +
                         "; a KV cache scale must be positive.");
      }
      return s;
    }
    return 1.f;
  }

  size_t bytes() const { return bytes_.load(); }
  const CheckpointFiles& files() const { return files_; }

 private:
  void count_linear(const std::string& prefix) {
    for (const char* suffix : kLinearTensors) {
      if (const Tensor* t = files_.find(prefix + suffix)) count(*t);
    }
  }

  void count(const Tensor& t) {
    progress_.advance(t.bytes.size());
    bytes_ += t.bytes.size();
  }

  const CheckpointFiles& files_;
  LoadProgress& progress_;
  std::atomic<size_t> bytes_ = 0;
};

std::string dim(const char* field, int64_t v) { return std::string(field) + " " + std::to_string(v); }

// Granite's multipliers folded into the weights, so every backend runs it as Llama: each
// layer's o_proj and down_proj (and biases) take residual_multiplier, the embeddings
// embedding_multiplier, and the final norm 1/logits_scaling — and 1/embedding_multiplier too
// when the lm_head is the (now scaled) embedding table. Rounded once to the weights' own
// precision (fp16 values or scales; fp8 scales in f32).
void fold_multipliers(LoadedModel& m, const std::string& directory) {
  const ModelConfig& c = m.config;
  const std::string at = directory + ": ";
  if (c.residual_multiplier != 1) {
    const float r = float(c.residual_multiplier);
    for (size_t i = 0; i < m.layers.size(); ++i) {
      LoadedLayer& l = m.layers[i];
      const std::string p = "model.layers." + std::to_string(i) + ".";
      quant::scale_rows(l.o, r, at + p + "self_attn.o_proj (residual_multiplier)");
      quant::scale_rows(l.down, r, at + p + "mlp.down_proj (residual_multiplier)");
      quant::scale_halves(l.o_bias.data(), l.o_bias.size(), r, at + p + "self_attn.o_proj.bias (residual_multiplier)");
    }
  }
  if (c.embedding_multiplier != 1) {
    quant::scale_halves(m.embed_tokens.data(), m.embed_tokens.size(), c.embedding_multiplier,
                        at + "model.embed_tokens.weight (embedding_multiplier)");
  }
  const double logit_factor = 1.0 / (c.logits_scaling * (c.tie_word_embeddings ? c.embedding_multiplier : 1.0));
  if (logit_factor != 1) {
    quant::scale_halves(m.final_norm.data(), m.final_norm.size(), logit_factor,
                        at + "model.norm.weight (logits_scaling)");
  }
}

LoadedLayer load_layer(Reader& r, const ModelConfig& c, int64_t i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const std::string hidden = dim("hidden_size", c.hidden);
  const int64_t q_rows = c.heads * c.head_dim, kv_rows = c.kv_heads * c.head_dim;
  LoadedLayer l;
  l.input_norm = r.vector_f16(p + "input_layernorm.weight", c.hidden, hidden);
  // Phi-3 publishes q|k|v and gate|up already fused, in the rows the stacked weights have.
  const bool phi3 = c.architecture == "Phi3ForCausalLM";
  l.qkv = phi3 ? r.linear(p + "self_attn.qkv_proj", q_rows + 2 * kv_rows, c.hidden, c.quant)
               : r.stacked({p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"},
                           {q_rows, kv_rows, kv_rows}, c.hidden, c.quant, p + "self_attn q_proj|k_proj|v_proj");
  if (c.attention_bias) {
    const std::string heads = "num_attention_heads × head_dim " + std::to_string(q_rows);
    const std::string kv = "num_key_value_heads × head_dim " + std::to_string(kv_rows);
    l.qkv_bias = r.vector_f16(p + "self_attn.q_proj.bias", q_rows, heads);
    for (const char* name : {"self_attn.k_proj.bias", "self_attn.v_proj.bias"}) {
      const auto b = r.vector_f16(p + name, kv_rows, kv);
      l.qkv_bias.insert(l.qkv_bias.end(), b.begin(), b.end());
    }
    // Llama's attention_bias also puts a bias on o_proj; Qwen2's and Qwen2-MoE's do not.
    if (c.architecture != "Qwen2ForCausalLM" && c.architecture != "Qwen2MoeForCausalLM") {
      l.o_bias = r.vector_f16(p + "self_attn.o_proj.bias", c.hidden, hidden);
    }
  }
  if (c.qk_norm) {
    const std::string hd = dim("head_dim", c.head_dim);
    l.q_norm = r.vector_f16(p + "self_attn.q_norm.weight", c.head_dim, hd);
    l.k_norm = r.vector_f16(p + "self_attn.k_norm.weight", c.head_dim, hd);
  }
  l.o = r.linear(p + "self_attn.o_proj", c.hidden, q_rows, c.quant);
  l.k_scale = r.kv_scale(p, "k");
  l.v_scale = r.kv_scale(p, "v");
  l.post_attention_norm = r.vector_f16(p + "post_attention_layernorm.weight", c.hidden, hidden);
  if (c.is_moe()) {
    // As Qwen publishes them: mlp.gate (the router) and mlp.experts.<e>.{gate,up,down}_proj;
    // Mixtral: block_sparse_moe.gate and block_sparse_moe.experts.<e>.w1 (gate), w3 (up), w2 (down).
    const bool mixtral = c.architecture == "MixtralForCausalLM";
    const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
    const std::string gate = mixtral ? "w1" : "gate_proj", up = mixtral ? "w3" : "up_proj",
                      down = mixtral ? "w2" : "down_proj";
    l.router = r.linear(block + "gate", c.experts, c.hidden, c.quant);
    l.experts.resize(size_t(c.experts));
    for (int64_t e = 0; e < c.experts; ++e) {
      const std::string q = block + "experts." + std::to_string(e) + ".";
      l.experts[size_t(e)].gate_up = r.stacked({q + gate, q + up}, {c.moe_intermediate, c.moe_intermediate}, c.hidden,
                                               c.quant, q + gate + "|" + up);
      l.experts[size_t(e)].down = r.linear(q + down, c.hidden, c.moe_intermediate, c.quant);
    }
    if (c.has_shared_expert()) {
      // Qwen2-MoE: mlp.shared_expert.{gate,up,down}_proj, a dense MLP every token runs, and
      // mlp.shared_expert_gate, [1][hidden] (16-bit like the router).
      const std::string q = p + "mlp.shared_expert.";
      l.gate_up = r.stacked({q + "gate_proj", q + "up_proj"}, {c.shared_intermediate, c.shared_intermediate}, c.hidden,
                            c.quant, q + "gate_proj|up_proj");
      l.down = r.linear(q + "down_proj", c.hidden, c.shared_intermediate, c.quant);
      l.shared_gate = r.linear(p + "mlp.shared_expert_gate", 1, c.hidden, c.quant);
    }
    return l;
  }
  l.gate_up = phi3 ? r.linear(p + "mlp.gate_up_proj", 2 * c.intermediate, c.hidden, c.quant)
                   : r.stacked({p + "mlp.gate_proj", p + "mlp.up_proj"}, {c.intermediate, c.intermediate}, c.hidden,
                               c.quant, p + "mlp gate_proj|up_proj");
  l.down = r.linear(p + "mlp.down_proj", c.hidden, c.intermediate, c.quant);
  return l;
}

}  // namespace

LoadedModel load_checkpoint(const std::string& directory, const LoadOptions& options) {
  LoadedModel m;
  m.config = load_model((std::filesystem::path(directory) / "config.json").string());
  const ModelConfig& c = m.config;
  bool loadable = false;
  for (const char* a : kLoadable) loadable |= c.architecture == a;
  if (!loadable) {
    throw InputError(directory + "/config.json: architecture " + c.architecture +
                     " cannot be loaded yet (onecat loads LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                     "Qwen3ForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, MixtralForCausalLM, "
                     "Phi3ForCausalLM and GraniteForCausalLM checkpoints).");
  }
  const CheckpointFiles files(directory);
  LoadProgress progress("loading " + c.name, files.total_bytes(), options.progress);
  Reader r(files, progress);
  const std::string vocab = dim("vocab_size", c.vocab) + " × " + dim("hidden_size", c.hidden);
  // Work items: the embeddings, lm_head (the largest, so first), then every layer; independent,
  // so packed on every core. A broken checkpoint reports the first broken item in this order,
  // whichever thread met it first.
  // The last layer's first tensor, before anything is sized by num_hidden_layers: a config that
  // claims 2^40 layers is a missing tensor, not an allocation that fails (std::bad_alloc aborted).
  files.require("model.layers." + std::to_string(c.layers - 1) + ".input_layernorm.weight");
  m.layers.resize(size_t(c.layers));
  constexpr int64_t embed_item = 0, lm_head_item = 1, first_layer_item = 2;
  std::vector<std::exception_ptr> errors(size_t(c.layers + 2));
  cpu::parallel_for(c.layers + 2, [&](int64_t i) {
    try {
      if (i == embed_item) {
        m.embed_tokens = r.matrix_f16("model.embed_tokens.weight", c.vocab, c.hidden, vocab);
        m.final_norm = r.vector_f16("model.norm.weight", c.hidden, dim("hidden_size", c.hidden));
      } else if (i == lm_head_item) {
        // Checkpoints with tied embeddings may still carry lm_head.weight (a copy); it is not needed.
        if (!c.tie_word_embeddings) m.lm_head = r.linear("lm_head", c.vocab, c.hidden, c.quant);
      } else {
        m.layers[size_t(i - first_layer_item)] = load_layer(r, c, i - first_layer_item);
      }
    } catch (...) {
      errors[size_t(i)] = std::current_exception();
    }
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  if (c.architecture == "GraniteForCausalLM") fold_multipliers(m, directory);
  progress.done();
  m.checkpoint_bytes = r.bytes();
  m.load_seconds = progress.seconds();
  return m;
}

}  // namespace onecat::models
