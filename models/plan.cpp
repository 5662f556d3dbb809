#include "models/plan.h"

#include <algorithm>
#include <unordered_set>

#include "base/error.h"
#include "codegen/family.h"
#include "codegen/gemm/space.h"
#include "codegen/moe/space.h"

namespace onecat::models {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

// The paged KV cache's page: 16 tokens, vLLM's default block size (fine-grained sharing of
// prefixes, little waste in a sequence's last page).
constexpr int kPageTokens = 16;
// Query tokens per sequence of a speculative verify pass: a draft of 7 tokens plus the last
// accepted one, the speculative-decoding default the plan assumes until the engine (not built
// yet) chooses its own (attention's verify takes 2..16).
constexpr int kVerifyTokens = 8;

struct WeightFmt {
  std::string fmt;
  int group = 0;
  bool act_order = false;
};

WeightFmt weight_format(const QuantConfig& q) {
  switch (q.method) {
    case QuantConfig::kNone: return {"f16", 0, false};
    case QuantConfig::kAwq: return {"awq4", q.group_size, false};
    case QuantConfig::kGptq: return {"gptq4", q.group_size, q.desc_act};
    case QuantConfig::kFp8Block:  // block_k 0: per-channel scales
      return q.block_k == 32 ? WeightFmt{"fp8b32", 32, false} : WeightFmt{"fp8b128", q.block_k, false};
    case QuantConfig::kNvfp4: return {"nvfp4", 16, false};
    case QuantConfig::kMxfp4: return {"mxfp4", 32, false};
  }
  return {"f16", 0, false};
}

// Runs the family's own parser over the spec text, so the plan holds canonical specs only and a
// shape the family rejects names the op.
std::string canonical(const std::string& op, const std::string& spec) {
  try {
    return family_of(spec).canonical_spec(spec);
  } catch (const InputError& e) {
    throw InputError("op " + op + ": " + e.what());
  }
}

class Planner {
 public:
  Planner(const ModelConfig& m, int tp, KvCacheDtype kv, int64_t fused_max_tokens)
      : m_(m), tp_(tp), kv_(kv), w_(weight_format(m.quant)), fused_max_tokens_(fused_max_tokens) {}

  std::vector<PlannedOp> run() {
    check();
    const int64_t L = m_.layers;
    const int64_t q_heads = m_.heads / tp_;
    const bool kv_replicated = m_.kv_heads < tp_;
    const int64_t kv_heads = std::max<int64_t>(1, m_.kv_heads / tp_);
    const std::string tp_text = "tp=" + s(tp_);
    const std::string kv_text =
        kv_replicated ? s(m_.kv_heads) + " KV heads < " + tp_text + ": KV heads replicated, 1 per rank"
                      : s(kv_heads) + " KV heads per rank";

    const int64_t vocab_rows = ceil_div(m_.vocab, tp_);
    ops_.push_back({"embed_tokens", "embedding",
                    canonical("embed_tokens", "embedding:vocab=" + s(vocab_rows) + ",hidden=" + s(m_.hidden)),
                    tp_ > 1 ? "vocab-parallel lookup of " + s(vocab_rows) + " rows of " + s(m_.hidden) +
                                  " per rank (ids outside the rank's slice give zero rows), then all-reduce"
                            : "lookup of " + s(m_.vocab) + " rows of " + s(m_.hidden),
                    1});
    add_rmsnorm("layers.input_layernorm", m_.hidden, true, L, "replicated; fused residual add");

    // q, k, v stacked: one column-parallel gemm.
    const int64_t qkv_n = (q_heads + 2 * kv_heads) * m_.head_dim;
    add_gemm("layers.qkv_proj", qkv_n, m_.hidden, false, m_.attention_bias ? "bias" : "none", L,
             "column-parallel: " + s(q_heads) + " q heads + " + kv_text + " (head_dim " + s(m_.head_dim) + ")" +
                 (m_.attention_bias ? ", q/k/v bias" : ""));
    const std::string heads_text = s(q_heads) + " q heads, " + s(kv_heads) + " kv heads, head_dim " + s(m_.head_dim);
    // One kernel from the projection to the cache: Qwen3's q/k RMSNorm, the rotation and the
    // write of K and V into the paged cache (what two rmsnorm ops and attention's kv_write
    // would do in three more launches and a K/V round trip). It runs before attention:
    // seq_lens count a pass's new tokens (docs/attention.md).
    ops_.push_back({"layers.rope", "rope",
                    canonical("layers.rope", "rope:heads=" + s(q_heads) + ",kv_heads=" + s(kv_heads) +
                                                 ",dim=" + s(m_.head_dim) + ",qk_norm=" + (m_.qk_norm ? "1" : "0") +
                                                 ",kv_out=pages,page=" + s(kPageTokens) + ",kv=" + kv_cache_spec_text(kv_)),
                    std::string(m_.qk_norm ? "q/k RMSNorm over head_dim, then " : "") +
                        "rotary embedding of q and k; K and V written into the paged cache: " + heads_text,
                    L});
    add_attention("layers.attention_prefill", "prefill", q_heads, kv_heads, L,
                  "prefill passes (causal, paged KV cache; chunked prefill and cached prefixes alike): " + heads_text);
    add_attention("layers.attention_decode", "decode", q_heads, kv_heads, L, "decode passes (paged KV cache): " + heads_text);
    add_attention("layers.attention_verify", "verify", q_heads, kv_heads, L,
                  "speculative-decoding verify passes, " + s(kVerifyTokens) + " query tokens per sequence: " + heads_text);
    add_gemm("layers.o_proj", m_.hidden, q_heads * m_.head_dim, tp_ > 1, "none", L,
             tp_ > 1 ? "row-parallel: f32 partial sums, all-reduced" : "full weight on one rank");
    if (tp_ > 1) add_unkernelled("layers.attn_allreduce", "allreduce", L, "NCCL all-reduce of o_proj's f32 partial sums");
    add_rmsnorm("layers.post_attention_layernorm", m_.hidden, true, L, "replicated; fused residual add");

    if (m_.is_moe()) {
      add_gemm_fmt("layers.moe_router", m_.experts, m_.hidden, false, "none", L, {"f16", 0, false},
                   "router logits over " + s(m_.experts) + " experts, replicated, not quantised");
      const int64_t inter = m_.moe_intermediate / tp_;
      const std::string topk = ",topk=" + s(m_.experts_per_token);
      const std::string experts = "experts=" + s(m_.experts) + topk;
      const std::string shape = "," + experts + ",hidden=" + s(m_.hidden) + ",inter=" + s(inter) + ",fmt=" + w_.fmt +
                                ",group=" + s(w_.group) + ",act_order=" + (w_.act_order ? "1" : "0");
      auto add_moe = [&](const std::string& name, const std::string& spec, const std::string& note) {
        ops_.push_back({name, "moe", canonical(name, spec), note, L});
      };
      add_moe("layers.moe_route", "moe:op=route," + experts + ",norm=" + (m_.norm_topk_prob ? "1" : "0"),
              "top-" + s(m_.experts_per_token) + " of " + s(m_.experts) + " experts per token" +
                  (m_.norm_topk_prob ? ", renormalised" : "") + "; pairs grouped by expert");
      add_moe("layers.moe_gate_up", "moe:op=gate_up" + shape,
              "each touched expert's gate and up stacked (silu_mul), token rows by index" +
                  (tp_ > 1 ? ", column-parallel: " + s(inter) + " of " + s(m_.moe_intermediate) + " columns" : std::string()));
      add_moe("layers.moe_down", "moe:op=down" + shape,
              "each touched expert's down projection, fp32 rows per (token, slot)" +
                  (tp_ > 1 ? std::string(", row-parallel partial sums") : std::string()));
      if (m_.has_shared_expert()) {
        const int64_t shared = m_.shared_intermediate;
        add_gemm("layers.moe_shared_gate_up", 2 * shared, m_.hidden, false, "silu_mul", L,
                 "the shared expert's gate and up stacked, every token, replicated");
        add_gemm("layers.moe_shared_down", m_.hidden, shared, false, "none", L, "the shared expert's down, replicated");
        add_gemm_fmt("layers.moe_shared_gate", 1, m_.hidden, false, "none", L, {"f16", 0, false},
                     "the shared expert's gate logit, not quantised");
      }
      add_moe("layers.moe_combine",
              "moe:op=combine" + topk + ",hidden=" + s(m_.hidden) + (m_.has_shared_expert() ? ",shared=gated" : ""),
              std::string("routing-weighted sum of each token's experts in slot order") +
                  (m_.has_shared_expert() ? ", plus sigmoid(gate) × the shared expert" : ""));
      if (tp_ == 1) {
        // Decode steps of one token with 4-bit experts: route, both projections and the combine
        // in one launch (codegen/moe/space.h decode_layer_tokens).
        const std::string spec = "moe:op=decode" + shape + ",norm=" + (m_.norm_topk_prob ? "1" : "0") +
                                 (m_.has_shared_expert() ? ",shared=gated" : "");
        const int64_t most = moe::decode_layer_tokens(moe::Spec::parse(spec));
        if (most > 0) ops_.push_back(
            {"layers.moe_decode", "moe", canonical("layers.moe_decode", spec),
             "decode steps of ≤ " + s(most) + " tokens: the layer's route, gate_up, down and combine in one launch", L,
             most});
      }
    } else {
      const int64_t inter = m_.intermediate / tp_;
      add_gemm("layers.gate_up_proj", 2 * inter, m_.hidden, false, "silu_mul", L,
               "column-parallel: gate and up stacked, " + s(inter) + " of " + s(m_.intermediate) + " columns each");
      add_gemm("layers.down_proj", m_.hidden, inter, tp_ > 1, "none", L,
               tp_ > 1 ? "row-parallel: f32 partial sums, all-reduced" : "full weight on one rank");
    }
    if (tp_ > 1) add_unkernelled("layers.mlp_allreduce", "allreduce", L, "NCCL all-reduce of the MLP's f32 partial sums");
    if (fused_max_tokens_ > 0 && tp_ == 1 && !m_.is_moe()) {
      // Decode steps of a few tokens: each norm in the gemv that reads it, each residual add in
      // the one that makes it (models/model/forward.cpp), instead of the four ops above them.
      const std::string fused = "decode steps of ≤ " + s(fused_max_tokens_) + " tokens: ";
      add_gemm("layers.qkv_proj_normed", qkv_n, m_.hidden, false, m_.attention_bias ? "bias" : "none", L,
               fused + "input_layernorm fused into qkv_proj", ",norm=rms", fused_max_tokens_);
      add_gemm("layers.o_proj_residual", m_.hidden, q_heads * m_.head_dim, false, "residual", L,
               fused + "o_proj adds into the residual stream", "", fused_max_tokens_);
      add_gemm("layers.gate_up_proj_normed", 2 * m_.intermediate, m_.hidden, false, "silu_mul", L,
               fused + "post_attention_layernorm fused into gate_up_proj", ",norm=rms", fused_max_tokens_);
      add_gemm("layers.down_proj_residual", m_.hidden, m_.intermediate, false, "residual", L,
               fused + "down_proj adds into the residual stream", "", fused_max_tokens_);
    }

    add_rmsnorm("norm", m_.hidden, true, 1, "final norm; fused residual add");
    const int64_t vocab_rank = ceil_div(m_.vocab, tp_);
    add_gemm_fmt("lm_head", vocab_rank, m_.hidden, false, "none", 1, {"f16", 0, false},
                 std::string(tp_ == 1                 ? ""
                             : m_.vocab % tp_ == 0 ? "column-parallel over the vocabulary, "
                                                   : "column-parallel over the vocabulary (" + s(m_.vocab) + " padded to " +
                                                         s(vocab_rank * tp_) + "), ") +
                     (m_.tie_word_embeddings ? "tied to embed_tokens, " : "") + "f16 (not quantised)");
    add_unkernelled("sampling", "sampling", 1,
                    tp_ > 1 ? "all-gather of the logits, then sampling over " + s(m_.vocab) : "sampling over " + s(m_.vocab));
    return std::move(ops_);
  }

 private:
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

  [[noreturn]] void fail(const std::string& dim, int64_t value, const std::string& why) const {
    throw InputError("model " + m_.name + ": " + dim + "=" + s(value) + " " + why + " at tp=" + s(tp_) + ".");
  }

  void check() const {
    if (tp_ != 1 && tp_ != 2 && tp_ != 4 && tp_ != 8) {
      throw InputError("model " + m_.name + ": tp=" + s(tp_) + " is not supported; use 1, 2, 4 or 8.");
    }
    if (m_.heads % tp_ != 0) fail("heads", m_.heads, "is not divisible by the tensor-parallel degree");
    if (m_.kv_heads >= tp_ ? m_.kv_heads % tp_ != 0 : tp_ % m_.kv_heads != 0) {
      fail("kv_heads", m_.kv_heads, "neither divides nor is a multiple of the tensor-parallel degree");
    }
    if (m_.is_moe()) {
      if (m_.moe_intermediate % tp_ != 0) fail("moe_intermediate", m_.moe_intermediate, "is not divisible by the tensor-parallel degree");
    } else if (m_.intermediate % tp_ != 0) {
      fail("intermediate", m_.intermediate, "is not divisible by the tensor-parallel degree");
    }
    // The experts' down projection is row-parallel too: a rank's K slice must hold whole
    // quantisation groups (the dense projections are checked by the gemm family itself).
    if (m_.is_moe() && w_.group > 0 && (m_.moe_intermediate / tp_) % w_.group != 0) {
      fail("moe_intermediate/tp", m_.moe_intermediate / tp_,
           "is not a multiple of the " + w_.fmt + " group " + s(w_.group) + " (a group would straddle two ranks)");
    }
    // fp8 blocks (128×128 or 32×32): a rank's slice must hold whole scale blocks along the sharded dimension.
    if (m_.quant.method == QuantConfig::kFp8Block && m_.quant.block_n > 0 && tp_ > 1) {
      const int64_t b = m_.quant.block_n;
      const std::string block = "is not a multiple of the fp8 block " + s(b);
      if ((m_.heads / tp_ * m_.head_dim) % b != 0) fail("heads*head_dim/tp", m_.heads / tp_ * m_.head_dim, block);
      if (m_.kv_heads >= tp_ && (m_.kv_heads / tp_ * m_.head_dim) % b != 0)
        fail("kv_heads*head_dim/tp", m_.kv_heads / tp_ * m_.head_dim, block);
      if (!m_.is_moe() && (m_.intermediate / tp_) % b != 0) fail("intermediate/tp", m_.intermediate / tp_, block);
    }
  }

  void add_gemm(const std::string& name, int64_t n, int64_t k, bool out_f32, const std::string& epi, int64_t count,
                const std::string& note, const std::string& extra = "", int64_t max_tokens = 0) {
    add_gemm_fmt(name, n, k, out_f32, epi, count, w_, note, extra, max_tokens);
  }

  void add_gemm_fmt(const std::string& name, int64_t n, int64_t k, bool out_f32, const std::string& epi, int64_t count,
                    const WeightFmt& w, const std::string& note, const std::string& extra = "",
                    int64_t max_tokens = 0) {
    const std::string spec = "gemm:n=" + s(n) + ",k=" + s(k) + ",fmt=" + w.fmt + ",group=" + s(w.group) +
                             ",out=" + (out_f32 ? "f32" : "f16") + ",epi=" + epi +
                             ",act_order=" + (w.act_order ? "1" : "0") + extra;
    ops_.push_back({name, "gemm", canonical(name, spec), note, count, max_tokens});
  }

  void add_rmsnorm(const std::string& name, int64_t hidden, bool residual, int64_t count, const std::string& note) {
    const std::string spec = "rmsnorm:hidden=" + s(hidden) + ",dtype=f16,residual=" + (residual ? "1" : "0");
    ops_.push_back({name, "rmsnorm", canonical(name, spec), note, count});
  }

  // One attention op over a paged cache of kPageTokens-token pages (fp16, or fp8 with a
  // per-tensor scale). A shape the family
  // has no kernel for (e.g. head_dim 96) is listed without a spec, with the family's reason:
  // the rest of the model still plans and tunes.
  void add_attention(const std::string& name, const std::string& op, int64_t q_heads, int64_t kv_heads, int64_t count,
                     const std::string& note) {
    std::string spec = "attention:op=" + op + (op == "kv_write" ? "" : ",heads=" + s(q_heads)) +
                       ",kv_heads=" + s(kv_heads) + ",dim=" + s(m_.head_dim) + ",page=" + s(kPageTokens) +
                       ",kv=" + kv_cache_spec_text(kv_);
    if (op != "kv_write") spec += ",window=" + s(m_.sliding_window);
    if (op == "verify") spec += ",q=" + s(kVerifyTokens);
    try {
      ops_.push_back({name, "attention", family_of(spec).canonical_spec(spec), note, count});
    } catch (const InputError& e) {
      ops_.push_back({name, "attention", std::nullopt, "no kernel for this shape yet (" + std::string(e.what()) + "); " + note, count});
    }
  }

  void add_unkernelled(const std::string& name, const std::string& family, int64_t count, const std::string& note) {
    ops_.push_back({name, family, std::nullopt, "no kernel family yet; " + note, count});
  }

  const ModelConfig& m_;
  int tp_;
  KvCacheDtype kv_;
  WeightFmt w_;
  int64_t fused_max_tokens_;
  std::vector<PlannedOp> ops_;
};

}  // namespace

int64_t gpu_fused_norm_max_tokens(Arch arch) {
  return kGpuFusesNorms ? std::min(kFusedNormMaxTokens, gemm::gemv_default_max_m(arch)) : 0;
}

std::vector<PlannedOp> plan_model(const ModelConfig& model, int tp, KvCacheDtype kv, int64_t fused_max_tokens) {
  return Planner(model, tp, kv, fused_max_tokens).run();
}

KvCacheDtype parse_kv_cache_dtype(const std::string& text) {
  if (text == "auto" || text == "f16" || text == "fp16") return KvCacheDtype::kF16;
  if (text == "fp8" || text == "fp8_e4m3" || text == "e4m3") return KvCacheDtype::kE4m3;
  if (text == "fp8_e5m2" || text == "e5m2") return KvCacheDtype::kE5m2;
  throw InputError("--kv-cache-dtype: " + quoted_input(text) + " is not a KV cache type (auto, fp8, fp8_e4m3 or fp8_e5m2)");
}

std::string kv_cache_spec_text(KvCacheDtype kv) {
  return kv == KvCacheDtype::kF16 ? "f16" : kv == KvCacheDtype::kE4m3 ? "e4m3,kv_scale=tensor" : "e5m2,kv_scale=tensor";
}

int64_t spec_max_tokens(const std::vector<PlannedOp>& plan, const std::string& spec) {
  int64_t most = -1;
  for (const auto& op : plan) {
    if (op.spec != spec) continue;
    if (op.max_tokens == 0) return 0;
    most = std::max(most, op.max_tokens);
  }
  return std::max<int64_t>(most, 0);
}

std::vector<std::string> unique_specs(const std::vector<PlannedOp>& plan) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& op : plan) {
    if (op.spec && seen.insert(*op.spec).second) out.push_back(*op.spec);
  }
  return out;
}

}  // namespace onecat::models
