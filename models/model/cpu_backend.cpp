#include "models/model/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/parallel.h"
#include "runtime/cpu/rmsnorm.h"
#include "runtime/cpu/sampling.h"

namespace onecat::model {
namespace {

// W[N][K] in fp32, columns in the activations' order.
struct Matrix {
  std::vector<float> w;
  int64_t n = 0, k = 0;
};

Matrix dequantized(const quant::PackedWeight& packed) {
  Matrix m{cpu::dequantize(packed), packed.n, packed.k};
  if (!packed.perm.empty()) {
    // gptq act-order keeps column k' = original column perm[k']; put them back once, so the
    // gemm reads the activations in order.
    std::vector<float> w(m.w.size());
    for (int64_t n = 0; n < m.n; ++n) {
      for (int64_t k = 0; k < m.k; ++k) w[size_t(n * m.k + packed.perm[size_t(k)])] = m.w[size_t(n * m.k + k)];
    }
    m.w = std::move(w);
  }
  return m;
}

Matrix from_f16(const std::vector<uint16_t>& h, int64_t n, int64_t k) {
  Matrix m{std::vector<float>(h.size()), n, k};
  for (size_t i = 0; i < h.size(); ++i) m.w[i] = cpu::half_to_float(h[i]);
  return m;
}

// Eight running sums in a fixed order: vectorisable without reassociating, so every run gives
// the same bits.
float dot(const float* a, const float* b, int64_t k) {
  std::array<float, 8> s{};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) s[size_t(l)] += a[i + l] * b[i + l];
  }
  float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < k; ++i) sum += a[i] * b[i];
  return sum;
}

// y[m][n] = x[m][k] · W[n][k]ᵀ, fp32; columns of y in parallel.
void matmul(const float* x, int64_t m, const Matrix& w, float* y) {
  constexpr int64_t kColumnsPerTask = 32;
  cpu::parallel_chunks(w.n, kColumnsPerTask, [&](int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t n = n0; n < n1; ++n) y[i * w.n + n] = dot(x + i * w.k, &w.w[size_t(n * w.k)], w.k);
    }
  });
}

// The gate|up epilogue of the dense MLP and of every expert, before its fp16 rounding.
float silu_mul(float gate, float up) { return gate / (1.f + std::exp(-gate)) * up; }
float round_half(float v) { return cpu::half_to_float(cpu::float_to_half(v)); }

// h[i][j] = silu(gate)·up rounded to fp16, for m rows y[i] = [gate | up] of 2·inter each.
void silu_mul_rows(const float* y, int64_t m, int64_t inter, float* h) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < inter; ++j) h[i * inter + j] = round_half(silu_mul(y[i * 2 * inter + j], y[i * 2 * inter + inter + j]));
  }
}

struct Expert {
  Matrix gate_up, down;
};

struct LayerWeights {
  std::vector<uint16_t> input_norm, post_attention_norm, q_norm, k_norm, qkv_bias, o_bias;
  Matrix qkv, o, gate_up, down;
  Matrix router;                // MoE: [experts][hidden]
  std::vector<Expert> experts;  // MoE
  Matrix shared_gate;           // MoE with a shared expert (gate_up and down its weights): [1][hidden]
  float k_scale[1] = {1.f}, v_scale[1] = {1.f};  // an fp8 KV cache's (models::LoadedLayer)
};

}  // namespace

struct CpuBackend::Weights {
  std::vector<uint16_t> embed, final_norm;
  Matrix lm_head;
  std::vector<LayerWeights> layers;
  cpu::RopeTable rope;
};

struct CpuBackend::Buffers {
  std::array<std::vector<uint16_t>, kActCount> acts;  // by Act
  std::array<int64_t, kActCount> width{};
  std::vector<float> x, y;                              // gemm scratch, fp32 [max_tokens][widest]
  std::vector<float> logits;                            // [max_tokens][vocab]
  // MoE: each token's experts and weights [max_tokens][top-k], one expert's gathered rows
  // [max_tokens][hidden] and their outputs, and every (token, slot)'s down output
  // [max_tokens][top-k][hidden].
  std::vector<int32_t> route_expert;
  std::vector<float> route_weight, expert_x, expert_y, expert_h, expert_out;
  std::vector<float> shared_y, shared_h, shared_out, shared_logit;  // the shared expert
  // Per layer, [pages][kv_heads][page][dim] elements of BackendLimits::kv_dtype (2 or 1 bytes).
  std::vector<std::vector<uint8_t>> k_cache, v_cache;
  // The step's batch.
  std::vector<int32_t> ids, positions, slots, cu_q, part_cu_q, seq_lens, block_table, logit_rows;
  int64_t tokens = 0, logit_count = 0;
  int sequences = 0, decode_sequences = 0, verify_sequences = 0, max_pages = 0;

  uint16_t* act(Act a) { return acts[size_t(a)].data(); }
};

CpuBackend::CpuBackend(const models::LoadedModel& model, const BackendLimits& limits)
    : config_(model.config),
      limits_(limits),
      weights_(std::make_unique<Weights>()),
      buffers_(std::make_unique<Buffers>()) {
  const models::ModelConfig& c = config_;
  limits.check("CPU backend");
  if (limits.kv_pages == 0) throw Error("CPU backend: the KV cache needs a size (it is sized from memory on a GPU only)");
  if (int64_t(model.layers.size()) != c.layers) throw Error("CPU backend: the model's layers do not match its config");
  Weights& w = *weights_;
  w.embed = model.embed_tokens;
  w.final_norm = model.final_norm;
  w.lm_head = model.lm_head ? dequantized(*model.lm_head) : from_f16(model.embed_tokens, c.vocab, c.hidden);
  w.layers.resize(model.layers.size());
  // Layers dequantise independently: all cores.
  cpu::parallel_for(c.layers, [&](int64_t i) {
    const models::LoadedLayer& from = model.layers[size_t(i)];
    LayerWeights& to = w.layers[size_t(i)];
    to.input_norm = from.input_norm;
    to.post_attention_norm = from.post_attention_norm;
    to.q_norm = from.q_norm;
    to.k_norm = from.k_norm;
    to.qkv_bias = from.qkv_bias;
    to.o_bias = from.o_bias;
    to.k_scale[0] = from.k_scale;
    to.v_scale[0] = from.v_scale;
    to.qkv = dequantized(from.qkv);
    to.o = dequantized(from.o);
    if (c.is_moe()) {
      if (int64_t(from.experts.size()) != c.experts || from.router.n != c.experts)
        throw Error("CPU backend: a MoE layer's experts do not match its config");
      to.router = dequantized(from.router);
      for (const models::LoadedExpert& e : from.experts) to.experts.push_back({dequantized(e.gate_up), dequantized(e.down)});
      if (c.has_shared_expert()) to.shared_gate = dequantized(from.shared_gate);
    }
    if (!c.is_moe() || c.has_shared_expert()) {  // the dense MLP, or the shared expert's
      to.gate_up = dequantized(from.gate_up);
      to.down = dequantized(from.down);
    }
  });
  w.rope = cpu::rope_table(c.rope, int(c.head_dim));

  Buffers& b = *buffers_;
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  b.width = act_widths(c);
  for (size_t a = 0; a < b.acts.size(); ++a) b.acts[a].assign(size_t(limits.max_tokens * b.width[a]), 0);
  const int64_t widest = std::max({c.hidden, q_width + 2 * kv_width, 2 * c.intermediate, c.vocab, c.experts});
  b.x.resize(size_t(limits.max_tokens * widest));
  b.y.resize(size_t(limits.max_tokens * widest));
  b.logits.resize(size_t(limits.max_tokens * c.vocab));
  if (c.is_moe()) {
    const int64_t routes = limits.max_tokens * c.experts_per_token;
    b.route_expert.resize(size_t(routes));
    b.route_weight.resize(size_t(routes));
    b.expert_x.resize(size_t(limits.max_tokens * c.hidden));
    b.expert_y.resize(size_t(limits.max_tokens * 2 * c.moe_intermediate));
    b.expert_h.resize(size_t(limits.max_tokens * c.moe_intermediate));
    b.expert_out.resize(size_t(routes * c.hidden));
    if (c.has_shared_expert()) {
      b.shared_y.resize(size_t(limits.max_tokens * 2 * c.shared_intermediate));
      b.shared_h.resize(size_t(limits.max_tokens * c.shared_intermediate));
      b.shared_out.resize(size_t(limits.max_tokens * c.hidden));
      b.shared_logit.resize(size_t(limits.max_tokens));
    }
  }
  const size_t cache = size_t(limits.kv_pages * limits.page_size * kv_width);
  const size_t cache_bytes = cache * size_t(models::kv_cache_element_bytes(limits.kv_dtype));
  b.k_cache.assign(size_t(c.layers), std::vector<uint8_t>(cache_bytes, 0));
  b.v_cache.assign(size_t(c.layers), std::vector<uint8_t>(cache_bytes, 0));
  b.ids.resize(size_t(limits.max_tokens));
  b.positions.resize(size_t(limits.max_tokens));
  b.slots.resize(size_t(limits.max_tokens));
  b.logit_rows.resize(size_t(limits.max_tokens));
  b.cu_q.resize(size_t(limits.max_sequences) + 1);
  b.part_cu_q.resize(size_t(limits.max_sequences) + 1);
  b.seq_lens.resize(size_t(limits.max_sequences));
  b.block_table.resize(size_t(limits.max_sequences * limits.row_pages()));
}

CpuBackend::~CpuBackend() = default;

void CpuBackend::begin(const ForwardBatch& batch) {
  Buffers& b = *buffers_;
  limits_.check_fits(batch, "CPU backend");
  auto copy = [](std::span<const int32_t> from, std::vector<int32_t>& to) {
    std::copy(from.begin(), from.end(), to.begin());
  };
  copy(batch.token_ids, b.ids);
  copy(batch.positions, b.positions);
  copy(batch.slot_mapping, b.slots);
  copy(batch.cu_q, b.cu_q);
  copy(batch.seq_lens, b.seq_lens);
  copy(batch.block_table, b.block_table);
  copy(batch.logit_rows, b.logit_rows);
  b.tokens = batch.tokens();
  b.sequences = batch.sequences();
  b.decode_sequences = batch.decode_sequences;
  b.verify_sequences = batch.verify_sequences;
  b.max_pages = batch.max_pages;
  b.logit_count = int64_t(batch.logit_rows.size());
}

void CpuBackend::embedding(Act out) {
  Buffers& b = *buffers_;
  cpu::embedding(b.act(out), weights_->embed.data(), b.ids.data(), b.tokens, config_.hidden, config_.vocab);
}

void CpuBackend::rmsnorm(Act out, Act x, std::optional<Act> residual, Norm weight) {
  Buffers& b = *buffers_;
  const Weights& w = *weights_;
  const std::vector<uint16_t>& gamma = weight.kind == Norm::kFinal ? w.final_norm
                                       : weight.kind == Norm::kInput
                                           ? w.layers[size_t(weight.layer)].input_norm
                                           : w.layers[size_t(weight.layer)].post_attention_norm;
  cpu::rmsnorm(b.act(out), b.act(x), residual ? b.act(*residual) : nullptr, gamma.data(), float(config_.rms_norm_eps),
               b.tokens, config_.hidden);
}

void CpuBackend::gemm(Act out, Act in, Linear weight, Epilogue epilogue) {
  Buffers& b = *buffers_;
  const LayerWeights& l = weights_->layers[size_t(weight.layer)];
  const Matrix& w = weight.kind == Linear::kQkv      ? l.qkv
                    : weight.kind == Linear::kO      ? l.o
                    : weight.kind == Linear::kGateUp ? l.gate_up
                                                     : l.down;
  const uint16_t* x = b.act(in);
  for (int64_t i = 0; i < b.tokens * w.k; ++i) b.x[size_t(i)] = cpu::half_to_float(x[i]);
  matmul(b.x.data(), b.tokens, w, b.y.data());
  uint16_t* y = b.act(out);
  if (epilogue == Epilogue::kSiluMul) {
    const int64_t half = w.n / 2;
    for (int64_t i = 0; i < b.tokens; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const float gate = b.y[size_t(i * w.n + j)], up = b.y[size_t(i * w.n + half + j)];
        y[i * half + j] = cpu::float_to_half(silu_mul(gate, up));
      }
    }
    return;
  }
  if (epilogue == Epilogue::kResidual) {  // out ← out + in·Wᵀ, the product rounded first (as rmsnorm's add)
    for (int64_t i = 0; i < b.tokens * w.n; ++i) {
      y[i] = cpu::float_to_half(cpu::half_to_float(cpu::float_to_half(b.y[size_t(i)])) + cpu::half_to_float(y[i]));
    }
    return;
  }
  const std::vector<uint16_t>* bias = nullptr;
  if (epilogue == Epilogue::kBias) {
    bias = weight.kind == Linear::kQkv ? &l.qkv_bias : weight.kind == Linear::kO ? &l.o_bias : nullptr;
    if (!bias || int64_t(bias->size()) != w.n) throw Error("CPU backend: a bias epilogue on a linear without a bias");
  }
  for (int64_t i = 0; i < b.tokens; ++i) {
    for (int64_t n = 0; n < w.n; ++n) {
      const float v = b.y[size_t(i * w.n + n)] + (bias ? cpu::half_to_float((*bias)[size_t(n)]) : 0.f);
      y[i * w.n + n] = cpu::float_to_half(v);
    }
  }
}

bool CpuBackend::fuses_norms(const ForwardBatch& batch) const {
  return limits_.fused_norms && batch.decode_sequences == batch.sequences() &&
         batch.tokens() <= models::kFusedNormMaxTokens;
}

void CpuBackend::gemm_normed(Act out, Act in, Norm norm, Linear weight, Epilogue epilogue) {
  if (out == Act::kNormed || in == Act::kNormed) throw Error("CPU backend: gemm_normed uses kNormed as its scratch");
  rmsnorm(Act::kNormed, in, std::nullopt, norm);
  gemm(out, Act::kNormed, weight, epilogue);
}

void CpuBackend::moe(int layer, Act out, Act in) {
  Buffers& b = *buffers_;
  const models::ModelConfig& c = config_;
  const LayerWeights& l = weights_->layers[size_t(layer)];
  if (!c.is_moe()) throw Error("CPU backend: a MoE op on a dense model");
  const int64_t tokens = b.tokens, hidden = c.hidden, experts = c.experts, top = c.experts_per_token;
  const int64_t inter = c.moe_intermediate;
  const uint16_t* x = b.act(in);
  for (int64_t i = 0; i < tokens * hidden; ++i) b.x[size_t(i)] = cpu::half_to_float(x[i]);

  // Routing: fp16 logits, softmax in fp32, the top experts (ties: the lower id), renormalised
  // where asked (runtime/cpu/moe.h, the GPU checks' reference too).
  matmul(b.x.data(), tokens, l.router, b.y.data());
  std::vector<uint16_t> logits(size_t(tokens * experts));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = cpu::float_to_half(b.y[i]);
  const cpu::MoeRoute route = cpu::moe_route(logits.data(), tokens, int(experts), int(top), c.norm_topk_prob);
  std::copy(route.ids.begin(), route.ids.end(), b.route_expert.begin());
  std::copy(route.weights.begin(), route.weights.end(), b.route_weight.begin());

  // Each touched expert over the rows routed to it: gate|up, silu·mul in fp16, down in fp32.
  for (int64_t e = 0; e < experts; ++e) {
    // (token · top + slot) of the expert's rows, in pair order.
    const int32_t* routes = route.sorted.data() + route.offsets[size_t(e)];
    const int64_t m = route.offsets[size_t(e) + 1] - route.offsets[size_t(e)];
    if (m == 0) continue;
    const Expert& w = l.experts[size_t(e)];
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(&b.x[size_t(routes[i] / top * hidden)], hidden, &b.expert_x[size_t(i * hidden)]);
    }
    matmul(b.expert_x.data(), m, w.gate_up, b.expert_y.data());
    silu_mul_rows(b.expert_y.data(), m, inter, b.expert_h.data());
    matmul(b.expert_h.data(), m, w.down, b.expert_y.data());
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(&b.expert_y[size_t(i * hidden)], hidden, &b.expert_out[size_t(routes[i] * hidden)]);
    }
  }

  // The shared expert (Qwen2-MoE) as the GPU runs it: gate|up, silu·mul in fp16, down rounded
  // to fp16, its gate's logit in fp16.
  const bool shared = c.has_shared_expert();
  if (shared) {
    const int64_t si = c.shared_intermediate;
    matmul(b.x.data(), tokens, l.gate_up, b.shared_y.data());
    silu_mul_rows(b.shared_y.data(), tokens, si, b.shared_h.data());
    matmul(b.shared_h.data(), tokens, l.down, b.shared_out.data());
    for (int64_t i = 0; i < tokens * hidden; ++i) b.shared_out[size_t(i)] = round_half(b.shared_out[size_t(i)]);
    matmul(b.x.data(), tokens, l.shared_gate, b.shared_logit.data());
  }

  // The weighted sum per token in top-k order (then the gated shared expert), rounded once.
  uint16_t* y = b.act(out);
  for (int64_t t = 0; t < tokens; ++t) {
    const float gate = shared ? 1.f / (1.f + std::exp(-round_half(b.shared_logit[size_t(t)]))) : 0.f;
    for (int64_t n = 0; n < hidden; ++n) {
      float sum = 0;
      for (int64_t k = 0; k < top; ++k) {
        sum += b.route_weight[size_t(t * top + k)] * b.expert_out[size_t((t * top + k) * hidden + n)];
      }
      if (shared) sum += gate * b.shared_out[size_t(t * hidden + n)];
      y[t * hidden + n] = cpu::float_to_half(sum);
    }
  }
}

cpu::PagedKv CpuBackend::paged_kv(int layer) {
  const LayerWeights& l = weights_->layers[size_t(layer)];
  cpu::PagedKv kv;
  kv.kv_heads = int(config_.kv_heads);
  kv.dim = int(config_.head_dim);
  kv.page = limits_.page_size;
  kv.dtype = limits_.kv_dtype == models::KvCacheDtype::kF16    ? cpu::KvDtype::kF16
             : limits_.kv_dtype == models::KvCacheDtype::kE4m3 ? cpu::KvDtype::kE4m3
                                                               : cpu::KvDtype::kE5m2;
  kv.k = buffers_->k_cache[size_t(layer)].data();
  kv.v = buffers_->v_cache[size_t(layer)].data();
  kv.k_scale = l.k_scale;
  kv.v_scale = l.v_scale;
  return kv;
}

void CpuBackend::rope_kv_write(int layer, Act qkv, Act q, Act k, Act v) {
  Buffers& b = *buffers_;
  const LayerWeights& l = weights_->layers[size_t(layer)];
  cpu::rope_qkv(b.act(qkv), b.positions.data(), b.tokens, int(config_.heads), int(config_.kv_heads),
                int(config_.head_dim), weights_->rope, l.q_norm.empty() ? nullptr : l.q_norm.data(),
                l.k_norm.empty() ? nullptr : l.k_norm.data(), float(config_.rms_norm_eps), b.act(q), b.act(k),
                b.act(v));
  cpu::kv_write(paged_kv(layer), b.act(k), b.act(v), b.slots.data(), b.tokens);
}

void CpuBackend::attention(int layer, Act q, Act out, int first, int sequences) {
  Buffers& b = *buffers_;
  const models::ModelConfig& c = config_;
  const cpu::PagedKv kv = paged_kv(layer);
  cpu::AttentionShape shape;
  shape.heads = int(c.heads);
  shape.causal = true;
  shape.window = int(c.sliding_window);
  shape.sm_scale = c.attention_scale();
  const int64_t row = c.heads * c.head_dim, first_token = b.cu_q[size_t(first)];
  // The sequences' own cu_q, from 0, for the attention call over them alone.
  for (int s = 0; s <= sequences; ++s) b.part_cu_q[size_t(s)] = b.cu_q[size_t(first + s)] - int32_t(first_token);
  cpu::attention(b.act(out) + first_token * row, b.act(q) + first_token * row, kv,
                 b.block_table.data() + size_t(first) * size_t(b.max_pages), b.max_pages, b.seq_lens.data() + first,
                 b.part_cu_q.data(), sequences, shape);
}

void CpuBackend::attention_decode(int layer, Act q, Act out) {
  attention(layer, q, out, 0, buffers_->decode_sequences);
}

void CpuBackend::attention_verify(int layer, Act q, Act out) {
  const Buffers& b = *buffers_;
  attention(layer, q, out, b.decode_sequences, b.verify_sequences);
}

void CpuBackend::attention_prefill(int layer, Act q, Act out) {
  const Buffers& b = *buffers_;
  const int first = b.decode_sequences + b.verify_sequences;
  attention(layer, q, out, first, b.sequences - first);
}

void CpuBackend::logits(Act in) {
  Buffers& b = *buffers_;
  const int64_t hidden = config_.hidden, rows = b.logit_count;
  const uint16_t* x = b.act(in);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* src = x + b.logit_rows[size_t(r)] * hidden;
    for (int64_t i = 0; i < hidden; ++i) b.x[size_t(r * hidden + i)] = cpu::half_to_float(src[i]);
  }
  matmul(b.x.data(), rows, weights_->lm_head, b.logits.data());
}

void CpuBackend::read_hidden(std::span<float> out) {
  const Buffers& b = *buffers_;
  const size_t count = size_t(b.logit_count * config_.hidden);
  if (out.size() != count) throw Error("CPU backend: read_hidden needs room for exactly rows × hidden floats");
  std::copy(b.x.begin(), b.x.begin() + std::ptrdiff_t(count), out.begin());  // logits()'s fp32 rows
}

void CpuBackend::read_logits(std::span<float> out) {
  const Buffers& b = *buffers_;
  const size_t count = size_t(b.logit_count * config_.vocab);
  if (out.size() != count) throw Error("CPU backend: read_logits needs room for exactly rows × vocab floats");
  std::copy(b.logits.begin(), b.logits.begin() + std::ptrdiff_t(count), out.begin());
}

void CpuBackend::read_logit_rows(std::span<const int32_t> rows, std::span<float> out) {
  const Buffers& b = *buffers_;
  const size_t vocab = size_t(config_.vocab);
  if (out.size() != rows.size() * vocab) throw Error("CPU backend: read_logit_rows needs room for rows × vocab floats");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= b.logit_count) throw Error("CPU backend: read_logit_rows names a row the step lacks");
    const auto from = b.logits.begin() + std::ptrdiff_t(size_t(rows[i]) * vocab);
    std::copy(from, from + std::ptrdiff_t(vocab), out.begin() + std::ptrdiff_t(i * vocab));
  }
}

void CpuBackend::read_argmax(std::span<int32_t> out) {
  const Buffers& b = *buffers_;
  if (int64_t(out.size()) != b.logit_count)
    throw Error("CPU backend: read_argmax needs room for exactly one id per row");
  for (int64_t r = 0; r < b.logit_count; ++r)
    out[size_t(r)] = cpu::argmax(b.logits.data() + r * config_.vocab, config_.vocab);
}

void CpuBackend::read_sampled(std::span<const SampleRequest> rows, std::span<cpu::SampledToken> out) {
  const Buffers& b = *buffers_;
  if (int64_t(rows.size()) != b.logit_count || out.size() != rows.size())
    throw Error("CPU backend: read_sampled needs one request and one result per logit row");
  std::vector<cpu::SampleRow> sample;
  for (size_t r = 0; r < rows.size(); ++r) {
    sample.push_back({b.logits.data() + int64_t(r) * config_.vocab, rows[r].params, rows[r].prompt, rows[r].output,
                      rows[r].step, rows[r].token_logprob});
  }
  std::vector<cpu::SampledToken> got = cpu::sample_rows(sample, config_.vocab);
  std::move(got.begin(), got.end(), out.begin());
}

}  // namespace onecat::model
