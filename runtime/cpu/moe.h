// CPU reference of the moe family's routing (codegen/moe/spec.h), shared by the CPU backend's
// MoE layer and the GPU checks: each token's top-k experts by its fp16 router logits (ties:
// the lower id; softmax keeps the logits' order), their softmax weights in fp32 (renormalised
// over the chosen ones with norm), and the (token·topk + slot) pairs grouped by expert in
// pair order; or the sigmoid router with correction bias and grouped top-k (DeepSeek-V3).
#pragma once
#include <cstdint>
#include <vector>

namespace onecat::cpu {

struct MoeRoute {
  std::vector<int32_t> ids;      // [tokens][topk], descending logit
  std::vector<float> weights;    // [tokens][topk]
  std::vector<int32_t> offsets;  // [experts + 1]: expert e's pairs are sorted[offsets[e] .. offsets[e+1])
  std::vector<int32_t> sorted;   // [tokens·topk] pair indices
};

// The router's parameters (codegen/moe/spec.h's route fields and the run-time ones).
struct MoeRouter {
  int experts = 0, topk = 0;
  bool norm = false;
  bool sigmoid = false;            // score=sigmoid (else softmax)
  const float* bias = nullptr;     // sigmoid: [experts] correction bias for the choice, or none
  int groups = 1, topk_groups = 1;  // sigmoid: grouped top-k
  float scale = 1.f;               // routed scaling factor on the weights
};

MoeRoute moe_route(const uint16_t* logits, int64_t tokens, const MoeRouter& router);
MoeRoute moe_route(const uint16_t* logits, int64_t tokens, int experts, int topk, bool norm);
// sigmoid(x) as the route kernel computes it: in double, rounded once to fp32, so both sides
// agree on the bits whatever their exp's last-place error (templates/moe/route.cuh).
float moe_sigmoid(float x);
// offsets and sorted of `ids` ([pairs] experts), in pair order within each expert.
void moe_group(const std::vector<int32_t>& ids, int experts, std::vector<int32_t>& offsets,
               std::vector<int32_t>& sorted);

}  // namespace onecat::cpu
