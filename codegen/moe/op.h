// moe's typed ops (codegen/moe/spec.h): route, gate_up, down and combine for `tokens` tokens.
// Pointers an op has no use for are ignored.
#pragma once
#include <cstdint>

#include "codegen/kernel_call.h"
#include "codegen/moe/config.h"
#include "codegen/moe/spec.h"

namespace onecat::moe {

// One projection's packed expert weights, stacked at a fixed stride (bytes) per buffer
// (codegen/moe/experts.h): global_scales [slots] fp32 (nvfp4) or 0; perm [slots][k] int32
// (gptq4 act_order).
struct ExpertWeights {
  DevicePtr qweight = 0, scales = 0, zeros = 0, perm = 0, global_scales = 0;
  int64_t qweight_stride = 0, scales_stride = 0, zeros_stride = 0;
};

struct Args {
  int64_t tokens = 0;
  // route: in logits [tokens][experts] fp16; out ids [tokens][topk] int32, weights
  // [tokens][topk] fp32, offsets [experts + 1] int32, sorted [tokens·topk] int32.
  DevicePtr logits = 0, ids = 0, weights = 0, offsets = 0, sorted = 0;
  // route with bias=1: the correction bias [experts] fp32; every route: the routed scaling
  // factor on the weights.
  DevicePtr bias = 0;
  float scale = 1.f;
  DevicePtr workspace = 0;  // route: workspace_bytes(spec, config, tokens), zeroed once when allocated
  // gate_up: x [tokens][hidden] fp16 → h [pairs][inter] fp16. down: h → y [pairs][hidden] fp32.
  // Both read offsets and sorted (route's) and the experts' packed weights, expert e's at
  // slot[e] × the stride in each buffer, slot [experts] int32 (0: expert e at e; an expert with
  // slot -1 is left to another launch, one per weight format).
  DevicePtr x = 0, h = 0, y = 0;
  ExpertWeights experts;
  DevicePtr slot = 0;
  // combine: y and weights → out [tokens][hidden] fp16; shared [tokens][hidden] fp16 (shared
  // expert) and shared_gate [tokens] fp16 logits (shared=gated).
  DevicePtr out = 0, shared = 0, shared_gate = 0;
  // decode: logits, bias and scale as route's; x → out as the layer; the gate_up weights in
  // `experts` (slot table: none), down's here; h and y scratch as gate_up's and down's
  // outputs; workspace: workspace_bytes(), zeroed once; ids and weights, where not 0, get the
  // routing as route's do (offsets and sorted are not written).
  ExpertWeights down;
};

// route over more than one CTA: a counter, the CTAs' counts per expert and the pairs' ranks
// (templates/moe/route.cuh); decode: its counters (templates/moe/decode.cuh). The kernels leave
// their counters at 0, so zero the workspace once, when it is allocated. The other ops and
// one-CTA routes take none.
int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t tokens);
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);

}  // namespace onecat::moe
