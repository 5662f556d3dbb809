// The ops the forward pass is written over (models/model/forward.h), one virtual call each;
// a CPU implementation (cpu_backend.h) and, later, a GPU one run the same layer loop. A backend
// owns its weights (uploaded or dequantised once), its activation buffers (sized at
// construction for the largest step: no allocation per step, so a GPU step can be captured in
// a CUDA graph) and the KV cache's memory. Activations are fp16 rows [tokens][width]; logits
// fp32 [logit rows][vocab].
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "models/config.h"
#include "models/model/forward_batch.h"
#include "models/plan.h"
#include "runtime/cpu/sampling.h"

namespace onecat::model {

// The activation buffers, [tokens][width] fp16, width:
enum class Act {
  kResidual,  // hidden: the residual stream
  kHidden,    // hidden: a block's output, before it joins the residual stream
  kNormed,    // hidden: rmsnorm output, the next gemm's input
  kQkv,       // (heads + 2·kv_heads)·head_dim: q|k|v projections (bias added)
  kQ,         // heads·head_dim: rotated (and, Qwen3, normed) queries
  kK,         // kv_heads·head_dim
  kV,         // kv_heads·head_dim
  kAttn,      // heads·head_dim: attention output
  kMlp,       // intermediate: silu(gate)·up
};
inline constexpr size_t kActCount = 9;

// Each Act's row width (halves) for `c`, indexed by Act.
inline std::array<int64_t, kActCount> act_widths(const models::ModelConfig& c) {
  const int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  return {c.hidden, c.hidden, c.hidden, q + 2 * kv, q, kv, kv, q, c.intermediate};
}

// A linear layer's weight (its bias, where the checkpoint has one, goes with it).
struct Linear {
  enum Kind { kQkv, kO, kGateUp, kDown } kind;
  int layer;
};

// An RMSNorm's weight.
struct Norm {
  enum Kind { kInput, kPostAttention, kFinal } kind;
  int layer = 0;  // unused for kFinal
};

enum class Epilogue {
  kNone,
  kBias,      // + the linear's bias
  kSiluMul,   // gate|up: silu(x·gateᵀ)·(x·upᵀ), width N/2
  kResidual,  // out ← out + in·Wᵀ (out is the residual stream: the block's output joins it in the gemm)
};

// One logit row's sampling: cpu::sample's arguments (settings without a logit_bias, the
// sequence's history, its output index as the step; token_logprob: report the chosen token's).
struct SampleRequest {
  const cpu::SamplingParams* params = nullptr;
  std::span<const int> prompt, output;
  uint64_t step = 0;
  bool token_logprob = false;
};

// What a backend sizes its buffers and KV cache for, once.
struct BackendLimits {
  int64_t max_tokens = 0;  // per step (and so logit rows per step)
  int max_sequences = 0;   // per step
  int64_t kv_pages = 0;    // pages in the KV cache (GPU: 0 = as many as memory_utilization leaves room for)
  int page_size = 16;      // tokens per page
  // The pages one sequence can hold (its block-table row, ceil(max_model_len / page_size));
  // 0 = kv_pages. Each step copies a row of this many entries per sequence.
  int64_t max_sequence_pages = 0;
  double memory_utilization = 0.9;  // GPU, kv_pages 0: the share of the GPU's memory onecat may hold
  // The cache's elements: fp16, or fp8 codes with one scale per tensor and layer, the
  // checkpoint's (models::LoadedLayer::k_scale, v_scale) or 1 (vLLM's default without calibrated
  // scales: E4M3 holds ±448, E5M2 ±57344, far beyond K and V after the norms).
  models::KvCacheDtype kv_dtype = models::KvCacheDtype::kF16;
  bool progress = false;  // GPU: a bar on stderr while the kernels are prepared (ModelOptions::progress)
  bool fused_norms = true;  // decode steps may fuse their norms (Backend::fuses_norms; off: the op-by-op forward)
  // GPU, kv_pages 0: what another model whose pool holds as many tokens (a draft model) will
  // need beside this one — its KV bytes per page and its weights and buffers — held back when
  // the pool is sized from memory (ModelOptions::draft_page_bytes, draft_bytes).
  size_t companion_page_bytes = 0, companion_bytes = 0;

  // A sequence's block-table row: max_sequence_pages, at most kv_pages.
  int64_t row_pages() const { return max_sequence_pages > 0 ? std::min(max_sequence_pages, kv_pages) : kv_pages; }
  // Error naming `backend` ("CPU backend") unless every limit is positive.
  void check(const char* backend) const;
  // Error unless `batch` fits the buffers sized for these limits.
  void check_fits(const ForwardBatch& batch, const char* backend) const;
};

// The KV pages a GPU has room for (vLLM's --gpu-memory-utilization): onecat may hold
// utilization × total bytes; what others held when it started (total − free_at_start) and what
// it has allocated since (free_at_start − free_now) come off, then `reserve`; whole pages of
// page_bytes (every layer's K and V). InputError when not one page fits, naming the figures.
int64_t kv_pages_for_memory(size_t total, size_t free_at_start, size_t free_now, double utilization, size_t page_bytes,
                            size_t reserve);

class Backend {
 public:
  virtual ~Backend() = default;

  // The step's batch (already checked): the backend copies ids, positions, slots, sequence
  // lengths and block tables into its own buffers. Every call below until the next begin()
  // is about this batch.
  virtual void begin(const ForwardBatch& batch) = 0;

  // out = embed_tokens[token_ids]
  virtual void embedding(Act out) = 0;
  // residual ? (residual ← x + residual; out = rmsnorm(residual)) : out = rmsnorm(x)
  virtual void rmsnorm(Act out, Act x, std::optional<Act> residual, Norm weight) = 0;
  // out = epilogue(in · Wᵀ), rounded to fp16 once.
  virtual void gemm(Act out, Act in, Linear weight, Epilogue epilogue) = 0;
  // Whether this batch's forward fuses each pre-projection RMSNorm into the gemm after it
  // (gemm_normed) and each block's residual add into the gemm before it (Epilogue::kResidual):
  // decode steps of a few tokens on a dense model, where a norm's launch costs more than its work.
  virtual bool fuses_norms(const ForwardBatch& batch) const = 0;
  // out = epilogue(rmsnorm(in) · Wᵀ) with `norm`'s weight; in (the residual stream) unchanged.
  virtual void gemm_normed(Act out, Act in, Norm norm, Linear weight, Epilogue epilogue) = 0;
  // qkv → q, and K and V into the layer's KV cache at the batch's slots: per-head RMSNorm of q
  // and k where the model has q_norm/k_norm (Qwen3), then RoPE at each token's position; v as
  // it is. One op, so a backend can write the cache straight from registers (the GPU's rope
  // kernel does); k and v are scratch rows a backend may use on the way.
  virtual void rope_kv_write(int layer, Act qkv, Act q, Act k, Act v) = 0;
  // out rows of the decode sequences (the first decode_sequences tokens), of the verify blocks
  // (the next verify_sequences sequences), or of the prefill chunks (the rest): causal attention
  // of q over each sequence's cached keys.
  virtual void attention_decode(int layer, Act q, Act out) = 0;
  virtual void attention_verify(int layer, Act q, Act out) = 0;
  virtual void attention_prefill(int layer, Act q, Act out) = 0;
  // Mixture of experts (Qwen3-MoE): out = Σ over the token's top experts of weight ·
  // down_e(silu(in · gate_eᵀ) · (in · up_eᵀ)). The router's logits (in · routerᵀ, rounded to
  // fp16 as every gemm's output) → softmax in fp32 → the experts_per_token largest (ties: the
  // lower expert id) → divided by their sum where norm_topk_prob; each expert's silu·mul
  // rounded to fp16, its down projection and the weighted sum in fp32, in that top-k order,
  // rounded once: the same input gives the same bits whatever the batch.
  virtual void moe(int layer, Act out, Act in) = 0;
  // The final norm's output rows named by logit_rows through lm_head (the embeddings when
  // tied), in fp32, into the backend's logits buffer.
  virtual void logits(Act in) = 0;
  // That buffer, [logit rows][vocab], copied out (the GPU backend's sampler reads it in place).
  virtual void read_logits(std::span<float> out) = 0;
  // Some of that buffer's rows (indices among the step's logit rows), [rows][vocab], copied out
  // without changing it: the rows the host samples in a step whose other rows the backend
  // samples (read_argmax, read_sampled), which read the buffer as it is.
  virtual void read_logit_rows(std::span<const int32_t> rows, std::span<float> out) = 0;
  // Greedy decoding without copying the logits out: the lowest id among each logit row's
  // maxima (NaN never wins; cpu::argmax's rule), [logit rows].
  virtual void read_argmax(std::span<int32_t> out) = 0;
  // After one of the reads above: the step's final hidden states, the lm_head's input rows
  // (the final norm's output) of its logit rows, [logit rows][hidden] in fp32 — what drafters
  // on the target's hidden states (MTP heads, EAGLE) read (engine/drafter.h).
  virtual void read_hidden(std::span<float> out) = 0;
  // Readies read_sampled (the GPU: its kernels for every sequence bucket and their buffers),
  // so that no step compiles; called once by an engine that samples where the logits are.
  virtual void prepare_sampling() {}
  // Sampling without copying the logits out, after prepare_sampling: rows[i] samples logit
  // row i (one request per row; at most max_sequences rows). The CPU backend is cpu::sample_rows, bit for bit; the GPU
  // runs op=sample (docs/sampling.md), which decides as that fp64 reference does except where
  // a decision lies within fp32 rounding of its boundary.
  virtual void read_sampled(std::span<const SampleRequest> rows, std::span<cpu::SampledToken> out) = 0;
};

}  // namespace onecat::model
