// moe spec: one mixture-of-experts layer's kernels, everything but the token count fixed.
//   moe:op=route,experts=128,topk=8,norm=1
//   moe:op=route,experts=256,topk=8,norm=1,score=sigmoid,bias=1,groups=8,topk_groups=4
//   moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4,group=128,act_order=0
//   moe:op=down,experts=128,topk=8,hidden=2048,inter=768,fmt=awq4,group=128,act_order=0
//   moe:op=combine,topk=8,hidden=2048
//   moe:op=combine,topk=4,hidden=2048,shared=gated
//   moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=awq4,group=128,act_order=0
// route: fp16 router logits [T][experts] → each token's top-k experts (ties: the lower id) and
// their softmax weights (renormalised over the chosen ones with norm=1), then the pairs
// (token·topk + slot) grouped by expert in pair order: per-expert offsets and the sorted pairs.
// score=sigmoid (DeepSeek-V3, GLM-4.5): each expert's score is sigmoid(logit) and it is chosen
// by score + its correction bias (bias=1: an fp32 [experts] input; 0: none); with groups=G the
// experts form G equal groups of consecutive ids, each group rated by the sum of its two best
// choice values, and only the experts of the topk_groups best groups compete (the others count
// as 0, as transformers' masked_fill does). The weights are the chosen experts' scores without
// the bias, over their sum + 1e-20 with norm=1. Either score: the weights are then multiplied by
// the routed scaling factor, a run-time argument (1 for Qwen3).
// gate_up: h[pair] = silu(x[token]·Wgᵀ) · (x[token]·Wuᵀ) with the pair's expert's stacked
// [gate; up] weight, token rows read by index. down: y[pair] = h[pair]·Wdᵀ in fp32.
// combine: out[token] = Σ_slot weight · y[pair] in slot order, rounded once to fp16; with a
// shared expert (its output an input of the op), + shared[token] (shared=plain, DeepSeek) or
// + sigmoid(shared gate logit) · shared[token] (shared=gated, Qwen2-MoE).
// decode: the whole layer for a few tokens in one launch (templates/moe/decode.cuh): route's
// fields and result, gate_up and down in one weight format (both projections' fields), combine's
// `shared`; out as combine's, h and y as scratch.
// The canonical form prints the fields its op uses, in this order; group defaults to the
// format's usual one, act_order (gptq4 only) to 0.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "codegen/gemm/spec.h"

namespace onecat::moe {

enum class Op { kRoute, kGateUp, kDown, kCombine, kDecode };

inline constexpr int kMaxExperts = 512;  // the route kernel holds a token's logits in registers (16 per lane)
inline constexpr int kMaxTopk = 16;
inline constexpr int kMaxGroups = 32;  // route: a lane holds every group's rating
inline constexpr int64_t kMaxDim = 1 << 16;

struct Spec {
  Op op = Op::kRoute;
  int experts = 0;  // route, gate_up, down
  int topk = 0;
  bool norm = false;  // route: renormalise the chosen weights to sum to one (norm_topk_prob)
  bool sigmoid = false;  // route: score=sigmoid (else softmax)
  bool bias = false;     // route, sigmoid: add the correction bias for the choice
  int groups = 1, topk_groups = 1;  // route, sigmoid: grouped top-k (1, 1: no grouping)
  enum class Shared { kNone, kPlain, kGated };
  Shared shared = Shared::kNone;    // combine
  int64_t hidden = 0, inter = 0;  // gate_up, down: model width, one expert's intermediate width; combine: hidden
  quant::WeightFormat format = quant::WeightFormat::kF16;  // gate_up, down
  int group = 0;
  bool act_order = false;

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  // gate_up and down: one expert's projection as a gemm spec (gate_up: n = 2·inter with the
  // silu_mul epilogue, k = hidden; down: n = hidden, k = inter, fp32 out).
  gemm::Spec projection() const;
  // decode: its projection `which` (kGateUp or kDown), as projection() of that op's spec.
  gemm::Spec projection(Op which) const;
  bool routes() const { return op == Op::kRoute || op == Op::kDecode; }
  bool projects() const { return op == Op::kGateUp || op == Op::kDown || op == Op::kDecode; }
  bool combines() const { return op == Op::kCombine || op == Op::kDecode; }
  friend bool operator==(const Spec&, const Spec&) = default;
};

std::string_view op_name(Op op);

}  // namespace onecat::moe
