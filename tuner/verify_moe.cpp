// The moe family's GPU check and tuning workload (tuner/harness.cpp registers both).
//   route: random fp16 logits with tied rows (every expert equal: the lowest ids win) and
//   skewed rows (the same experts far ahead) → ids, offsets and sorted bit-exact against
//   runtime/cpu/moe.h, weights within kWeightTolerance. score=sigmoid: a random correction bias
//   (bias=1), scaling factor 2.5, and rows whose best experts sit in one group (grouped top-k
//   must still pick only from the kept groups).
//   gate_up, down: a routing where every other token goes to the same `topk` experts (tiles of
//   many pairs next to experts with one pair and experts with none; tuning cycles through it and
//   further uniform and skewed routings, MoeBatch::timing), experts' weights of
//   kDistinctExperts random contents in the format's kernel layout, against cpu::gemm (fp64)
//   per pair, with the gemm family's bounds. An odd token count also exercises the slot table:
//   the weights stacked in reverse expert order and every seventh expert left to another launch
//   (its pairs must stay unwritten).
//   combine: random fp32 rows and weights against the exact sum (fp64), within one fp16 unit plus
//   fp32's accumulation bound; with a shared expert, its random fp16 output (times the sigmoid of
//   a random gate logit with shared=gated).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "base/half.h"
#include "codegen/moe/emit.h"
#include "codegen/moe/experts.h"
#include "codegen/moe/op.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/moe.h"
#include "runtime/cuda/driver.h"
#include "tuner/attention_batch.h"
#include "tuner/gemm_rig.h"
#include "tuner/output_compare.h"
#include "tuner/random_weight.h"
#include "tuner/verify.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

constexpr unsigned char kPoisonByte = 0xff;
constexpr int kDistinctExperts = 3;  // weight contents, repeated over the experts
// fp32 softmax weights: __expf and the order of the sum against std::exp in order.
constexpr double kWeightTolerance = 1e-5;

void sync(const std::string& what) {
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", what);
}

template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t count) {
  std::vector<T> out(count);
  b.download(out.data(), count * sizeof(T));
  return out;
}

// Each token to `topk` distinct experts drawn uniformly; with `skewed`, every other token to
// experts hot..hot+topk-1 (mod experts, in a shuffled order) instead.
std::vector<int32_t> routing(const moe::Spec& s, int64_t tokens, bool skewed, std::mt19937_64& rng, int hot_first = 0) {
  std::vector<int32_t> ids(size_t(tokens * s.topk));
  std::vector<int32_t> all(size_t(s.experts));
  for (int e = 0; e < s.experts; ++e) all[size_t(e)] = e;
  for (int64_t t = 0; t < tokens; ++t) {
    if (skewed && t % 2 == 0) {
      std::vector<int32_t> hot(size_t(s.topk));
      for (int k = 0; k < s.topk; ++k) hot[size_t(k)] = (hot_first + k) % s.experts;
      std::shuffle(hot.begin(), hot.end(), rng);
      std::copy(hot.begin(), hot.end(), ids.begin() + t * s.topk);
    } else {
      std::shuffle(all.begin(), all.end(), rng);
      std::copy(all.begin(), all.begin() + s.topk, ids.begin() + t * s.topk);
      if (skewed) std::sort(all.begin(), all.end());
    }
  }
  return ids;
}

// How many of `experts` experts the pairs' ids touch.
int count_touched(const std::vector<int32_t>& ids, int experts) {
  std::vector<uint8_t> t(size_t(experts), 0);
  for (int32_t e : ids) t[size_t(e)] = 1;
  return int(std::count(t.begin(), t.end(), 1));
}

// The inputs of one check or workload of a moe spec at `tokens` tokens.
struct MoeBatch {
  moe::Spec spec;
  int64_t tokens = 0, pairs = 0;
  // route
  std::vector<uint16_t> logits;
  std::vector<float> bias;  // score=sigmoid with bias=1
  float scale = 1.f;
  // gate_up, down: routing, the slot table (empty: none), the distinct weights, inputs
  std::vector<int32_t> ids, offsets, sorted, slot;
  std::vector<quant::PackedWeight> weights;
  std::vector<uint16_t> in;     // gate_up: x [tokens][hidden]; down: h [pairs][inter]
  // combine
  std::vector<float> rows, route_weights;
  std::vector<uint16_t> shared, shared_gate;  // shared expert: its output, its gate's logits
  DeviceBuffer d_shared, d_shared_gate;

  DeviceBuffer d_route_workspace;  // route: the largest any config takes (tokens=1), zeroed once
  DeviceBuffer d_logits, d_bias, d_ids, d_weights, d_offsets, d_sorted, d_slot, d_in, d_out;
  // Timing (gate_up, down, decode): the routings launches cycle through after the check's
  // (routing 0, skewed), uniform and skewed in turn (real routers are trained toward balance;
  // prompts skew them), each skewed one on other hot experts. Enough of them that a launch's
  // experts have left the L2 before a routing comes round again (rotation_copies): one token's
  // eight experts fit an H100's L2 twice over.
  struct TimingRouting {
    std::vector<int32_t> ids;
    DeviceBuffer logits, offsets, sorted;  // decode: logits; gate_up, down: offsets, sorted
  };
  std::vector<TimingRouting> timing;
  int routings() const { return 1 + int(timing.size()); }
  const std::vector<int32_t>& ids_of(int r) const { return r == 0 ? ids : timing[size_t(r - 1)].ids; }
  // The projections' reference, computed by the first check and kept for the next candidates.
  std::vector<float> want;
  std::vector<uint8_t> served_pairs;
  // A projection's weights on the GPU, kDistinctExperts contents repeated over every expert.
  struct DeviceStack {
    DeviceBuffer qweight, scales, zeros, perm, global;
    std::array<int64_t, 3> strides{};  // qweight, scales, zeros bytes per expert
    moe::ExpertWeights weights() const {
      return {qweight.ptr(), scales.ptr(), zeros.ptr(), perm.ptr(), global.ptr(), strides[0], strides[1], strides[2]};
    }
  };
  DeviceStack d_experts;  // gate_up, down: the projection's; decode: gate_up's
  size_t out_bytes = 0;
  // decode: the router's (logits, bias, scale above, and its CPU result), the down projection's
  // weights (the gate_up ones above), h and y scratch, the counters.
  cpu::MoeRoute route;
  std::vector<quant::PackedWeight> down_weights;
  DeviceStack d_down;
  DeviceBuffer d_h, d_y, d_workspace;
  size_t workspace_bytes = 0;

  int content(int e) const { return (slot.empty() ? e : slot[size_t(e)]) % kDistinctExperts; }
  bool served(int e) const { return slot.empty() || slot[size_t(e)] >= 0; }

  // Router logits with tied rows (every expert equal: the lowest ids win) and skewed rows
  // (the same experts far ahead); score=sigmoid: a correction bias (bias=1), scaling factor 2.5
  // and rows whose best experts sit in one group.
  void make_logits(std::mt19937_64& rng, uint64_t seed) {
    const moe::Spec& s = spec;
    logits = random_half(rng, size_t(tokens * s.experts), -4.f, 4.f);
    for (int64_t t = 0; t < tokens; ++t) {
      uint16_t* row = logits.data() + t * s.experts;
      if (t % 5 == 2) std::fill(row, row + s.experts, cpu::float_to_half(0.25f));  // all tied
      if (t % 5 == 4) {
        for (int k = 0; k < s.topk; ++k) row[(k * 7) % s.experts] = cpu::float_to_half(8.f + float(k % 2));
      }
    }
    if (s.sigmoid) {
      scale = 2.5f;
      for (int64_t t = 3; t < tokens; t += 5) {  // one group's experts far ahead
        uint16_t* row = logits.data() + t * s.experts;
        const int per_group = s.experts / s.groups, g = int(t % s.groups);
        for (int e = g * per_group; e < (g + 1) * per_group; ++e) row[e] = cpu::float_to_half(6.f);
      }
    }
    if (s.bias) {
      SplitMix64 g{seed ^ 0x5bd1e995ull};
      bias.resize(size_t(s.experts));
      for (float& v : bias) v = g.uniform(-0.3f, 0.3f);
      d_bias = upload_bytes(bias.data(), bias.size() * 4);
    }
  }

  // Stacks kDistinctExperts contents of a projection's weights over every expert, as the
  // kernels read them.
  DeviceStack stack_projection(const std::vector<quant::PackedWeight>& ws) const {
    std::vector<const quant::PackedWeight*> contents;
    for (const quant::PackedWeight& w : ws) contents.push_back(&w);
    const moe::StackedExperts st =
        moe::stack_experts(contents, [](size_t d) { return "content " + std::to_string(d); });
    auto tiled = [&](const void* block, size_t bytes) {
      if (bytes == 0) return DeviceBuffer(16);
      return upload_tiled(block, bytes, bytes / kDistinctExperts * size_t(spec.experts));
    };
    DeviceStack d;
    d.qweight = tiled(st.qweight.data(), st.qweight.size());
    d.scales = tiled(st.scales.data(), st.scales.size());
    d.zeros = tiled(st.zeros.data(), st.zeros.size());
    d.perm = tiled(st.perm.data(), st.perm.size() * 4);
    d.global = tiled(st.global_scales.data(), st.global_scales.size() * 4);
    d.strides = {st.qweight_stride, st.scales_stride, st.zeros_stride};
    return d;
  }

  cpu::MoeRouter router() const {
    cpu::MoeRouter q;
    q.experts = spec.experts, q.topk = spec.topk, q.norm = spec.norm, q.sigmoid = spec.sigmoid;
    q.bias = bias.empty() ? nullptr : bias.data();
    q.groups = spec.groups, q.topk_groups = spec.topk_groups, q.scale = scale;
    return q;
  }

  // combine and decode: the shared expert's random output and gate logits (where the spec has
  // one) and out [tokens + 1][hidden] fp16 (a row past the last token, to catch writes there).
  void make_out(std::mt19937_64& rng) {
    if (spec.shared != moe::Spec::Shared::kNone) {
      shared = random_half(rng, size_t(tokens * spec.hidden), -2.f, 2.f);
      shared_gate = random_half(rng, size_t(tokens), -4.f, 4.f);
      d_shared = upload_bytes(shared.data(), shared.size() * 2);
      d_shared_gate = upload_bytes(shared_gate.data(), shared_gate.size() * 2);
    }
    out_bytes = size_t(tokens + 1) * size_t(spec.hidden) * 2;
    d_out = DeviceBuffer(out_bytes);
  }

  // Every other token far ahead on the topk experts from hot_first (tiles of many pairs beside
  // lone ones).
  void skew_logits(std::vector<uint16_t>& rows, int hot_first) const {
    for (int64_t t = 0; t < tokens; t += 2) {
      uint16_t* row = rows.data() + t * spec.experts;
      for (int k = 0; k < spec.topk; ++k) {
        row[(hot_first + k) % spec.experts] = cpu::float_to_half(9.f + 0.125f * float(k));
      }
    }
  }

  // Routings 1.. for timing: enough that the experts they touch, launch after launch, exceed
  // the L2 (bytes_per_expert: what a touched expert's weights take); at least one.
  template <class MakeRouting>
  void make_timing_routings(double bytes_per_expert, MakeRouting make) {
    const double touched = count_touched(ids, spec.experts);
    const int count = std::max(2, rotation_copies(size_t(touched * bytes_per_expert),
                                                  Driver::require_gpu().device_info(0).l2_bytes));
    for (int r = 1; r < count; ++r) timing.push_back(make(r % 2 == 0, r / 2 * spec.topk));
  }

  void make_decode(std::mt19937_64& rng, uint64_t seed, bool timing_too) {
    const moe::Spec& s = spec;
    make_logits(rng, seed);
    skew_logits(logits, 0);
    d_logits = upload_bytes(logits.data(), logits.size() * 2);
    route = cpu::moe_route(logits.data(), tokens, router());
    ids = route.ids;
    const gemm::Spec gu = s.projection(moe::Op::kGateUp), dn = s.projection(moe::Op::kDown);
    for (int d = 0; d < kDistinctExperts; ++d) weights.push_back(random_packed_weight(gu, rng));
    for (int d = 0; d < kDistinctExperts; ++d) down_weights.push_back(random_packed_weight(dn, rng));
    if (timing_too) {
      make_timing_routings(double(weights[0].bytes() + down_weights[0].bytes()), [&](bool skewed, int hot_first) {
        std::vector<uint16_t> rows = random_half(rng, size_t(tokens * s.experts), -4.f, 4.f);
        if (skewed) skew_logits(rows, hot_first);
        TimingRouting r;
        r.ids = cpu::moe_route(rows.data(), tokens, router()).ids;
        r.logits = upload_bytes(rows.data(), rows.size() * 2);
        return r;
      });
    }
    d_experts = stack_projection(weights);
    d_down = stack_projection(down_weights);
    in = random_half(rng, size_t(tokens * s.hidden), -0.5f, 0.5f);  // x (see the gate_up case)
    d_in = upload_bytes(in.data(), in.size() * 2);
    make_out(rng);
    d_h = DeviceBuffer(size_t(pairs + 1) * size_t(s.inter) * 2);
    d_y = DeviceBuffer(size_t(pairs + 1) * size_t(s.hidden) * 4);
    d_ids = DeviceBuffer(size_t(pairs) * 4 + 64);
    d_weights = DeviceBuffer(size_t(pairs) * 4 + 64);
    // The most any config takes: one row per down CTA.
    moe::Config most;
    most.op = moe::Op::kDecode, most.down_rows = 1;
    workspace_bytes = size_t(moe::workspace_bytes(s, most, tokens));
    d_workspace = DeviceBuffer(workspace_bytes);
    d_workspace.fill_bytes(0);
  }

  // slots: an odd token count also exercises the slot table (checks); for_timing: the timing
  // routings as well (workloads).
  MoeBatch(const moe::Spec& s, int64_t m, uint64_t seed, bool slots, bool for_timing)
      : spec(s), tokens(m), pairs(m * s.topk) {
    std::mt19937_64 rng(seed);
    switch (s.op) {
      case moe::Op::kRoute: {
        make_logits(rng, seed);
        d_logits = upload_bytes(logits.data(), logits.size() * 2);
        moe::Config most;  // one token per CTA: the most CTAs, the largest workspace
        most.op = moe::Op::kRoute, most.tokens = 1;
        d_route_workspace = DeviceBuffer(size_t(std::max<int64_t>(16, moe::workspace_bytes(s, most, tokens))));
        d_route_workspace.fill_bytes(0);
        d_ids = DeviceBuffer(size_t(pairs) * 4 + 64);
        d_weights = DeviceBuffer(size_t(pairs) * 4 + 64);
        d_offsets = DeviceBuffer(size_t(s.experts + 1) * 4 + 64);
        d_sorted = DeviceBuffer(size_t(pairs) * 4 + 64);
        break;
      }
      case moe::Op::kCombine: {
        rows.resize(size_t(pairs * s.hidden));
        SplitMix64 g{seed};
        for (float& v : rows) v = g.uniform(-2.f, 2.f);
        route_weights.resize(size_t(pairs));
        for (float& v : route_weights) v = g.uniform(0.f, 1.f);
        d_in = upload_bytes(rows.data(), rows.size() * 4);
        d_weights = upload_bytes(route_weights.data(), route_weights.size() * 4);
        make_out(rng);
        break;
      }
      case moe::Op::kDecode:
        make_decode(rng, seed, for_timing);
        break;
      case moe::Op::kGateUp:
      case moe::Op::kDown: {
        const gemm::Spec g = s.projection();
        ids = routing(s, tokens, true, rng);
        cpu::moe_group(ids, s.experts, offsets, sorted);
        if (slots && tokens % 2 == 1) {
          slot.resize(size_t(s.experts));
          for (int e = 0; e < s.experts; ++e) slot[size_t(e)] = e % 7 == 3 ? -1 : s.experts - 1 - e;
        }
        for (int d = 0; d < kDistinctExperts; ++d) weights.push_back(random_packed_weight(g, rng));
        const int64_t rows_in = s.op == moe::Op::kGateUp ? tokens : pairs;
        // gate_up: x in ±0.5 keeps silu(gate)·up inside fp16 on the widest formats (fp8b32 codes up to
        // 448 × 2^-4 over K = 2048 reach ±2^8 per dot product; ±1 overflowed a few of 10^6 outputs).
        in = random_half(rng, size_t(rows_in * g.k), s.op == moe::Op::kGateUp ? -0.5f : -1.f,
                         s.op == moe::Op::kGateUp ? 0.5f : 1.f);
        // Stacked by slot: slot i holds content i % kDistinctExperts.
        d_experts = stack_projection(weights);
        d_offsets = upload_bytes(offsets.data(), offsets.size() * 4);
        d_sorted = upload_bytes(sorted.data(), sorted.size() * 4);
        if (for_timing) {
          make_timing_routings(double(weights[0].bytes()), [&](bool skewed, int hot_first) {
            TimingRouting r;
            r.ids = routing(s, tokens, skewed, rng, hot_first);
            std::vector<int32_t> o, so;
            cpu::moe_group(r.ids, s.experts, o, so);
            r.offsets = upload_bytes(o.data(), o.size() * 4);
            r.sorted = upload_bytes(so.data(), so.size() * 4);
            return r;
          });
        }
        if (!slot.empty()) d_slot = upload_bytes(slot.data(), slot.size() * 4);
        d_in = upload_bytes(in.data(), in.size() * 2);
        out_bytes = size_t(pairs + 1) * size_t(g.out_cols()) * (s.op == moe::Op::kGateUp ? 2 : 4);
        d_out = DeviceBuffer(out_bytes);
        break;
      }
    }
  }

  // The arguments of the op on routing r (0: the check's; see `timing`).
  moe::Args args(int r = 0) const {
    moe::Args a;
    a.tokens = tokens;
    switch (spec.op) {
      case moe::Op::kRoute:
        a.logits = d_logits.ptr(), a.ids = d_ids.ptr(), a.weights = d_weights.ptr();
        a.offsets = d_offsets.ptr(), a.sorted = d_sorted.ptr();
        a.bias = bias.empty() ? 0 : d_bias.ptr(), a.scale = scale, a.workspace = d_route_workspace.ptr();
        break;
      case moe::Op::kDecode:
        a.logits = r == 0 ? d_logits.ptr() : timing[size_t(r - 1)].logits.ptr();
        a.bias = bias.empty() ? 0 : d_bias.ptr(), a.scale = scale;
        a.x = d_in.ptr(), a.h = d_h.ptr(), a.y = d_y.ptr(), a.out = d_out.ptr();
        a.ids = d_ids.ptr(), a.weights = d_weights.ptr(), a.workspace = d_workspace.ptr();
        a.experts = d_experts.weights(), a.down = d_down.weights();
        a.shared = shared.empty() ? 0 : d_shared.ptr(), a.shared_gate = shared.empty() ? 0 : d_shared_gate.ptr();
        break;
      case moe::Op::kCombine:
        a.out = d_out.ptr(), a.y = d_in.ptr(), a.weights = d_weights.ptr();
        a.shared = shared.empty() ? 0 : d_shared.ptr(), a.shared_gate = shared.empty() ? 0 : d_shared_gate.ptr();
        break;
      case moe::Op::kGateUp:
      case moe::Op::kDown: {
        if (spec.op == moe::Op::kGateUp) {
          a.x = d_in.ptr(), a.h = d_out.ptr();
        } else {
          a.h = d_in.ptr(), a.y = d_out.ptr();
        }
        a.experts = d_experts.weights(), a.offsets = d_offsets.ptr(), a.sorted = d_sorted.ptr();
        if (r > 0) a.offsets = timing[size_t(r - 1)].offsets.ptr(), a.sorted = timing[size_t(r - 1)].sorted.ptr();
        a.slot = slot.empty() ? 0 : d_slot.ptr();
        break;
      }
    }
    return a;
  }

  void poison() {
    if (spec.op == moe::Op::kRoute) {
      for (DeviceBuffer* b : {&d_ids, &d_weights, &d_offsets, &d_sorted}) b->fill_bytes(kPoisonByte);
    } else if (spec.op == moe::Op::kDecode) {
      for (DeviceBuffer* b : {&d_ids, &d_weights, &d_h, &d_y, &d_out}) b->fill_bytes(kPoisonByte);
    } else {
      d_out.fill_bytes(kPoisonByte);
    }
  }
};

// The kernel's experts per pair against the reference's, bit-exact (the first difference in
// r.detail).
void compare_ids(const MoeBatch& b, const std::vector<int32_t>& ids, const cpu::MoeRoute& want, CheckResult& r) {
  const int topk = b.spec.topk;
  for (int64_t p = 0; p < b.pairs && r.detail.empty(); ++p) {
    if (ids[size_t(p)] != want.ids[size_t(p)]) {
      r.detail = "token " + std::to_string(p / topk) + " slot " + std::to_string(p % topk) + ": expert " +
                 std::to_string(ids[size_t(p)]) + ", expected " + std::to_string(want.ids[size_t(p)]);
    }
  }
}

// The routing weights' largest relative error into r.error (over kWeightTolerance: r.detail).
void compare_weights(const MoeBatch& b, const std::vector<float>& weights, const cpu::MoeRoute& want, CheckResult& r) {
  for (int64_t p = 0; p < b.pairs; ++p) {
    const double w = want.weights[size_t(p)];
    const double err = std::abs(double(weights[size_t(p)]) - w) / std::max(std::abs(w), 1e-30);
    if (!(err <= r.error)) {
      r.error = std::isnan(err) ? INFINITY : err;
      if (err > kWeightTolerance && r.detail.empty()) {
        r.detail = "weight of pair " + std::to_string(p) + " = " + std::to_string(weights[size_t(p)]) + ", expected " +
                   std::to_string(w);
      }
    }
  }
}

// A projection's output rows (fp16 with gated, else fp32; row i is pair pair_of[i]) against the
// reference as the gemm family compares them: the 2-norm relative error (returned) within
// gemm_tolerance and every element within element_bound; the first failure in r.detail.
double compare_projection(const uint8_t* got, std::vector<float> want, const std::vector<int64_t>& pair_of,
                          const gemm::Spec& g, const std::string& what, CheckResult& r) {
  const bool gated = g.epilogue == gemm::Epilogue::kSiluMul;
  const int64_t cols = g.out_cols();
  if (gated) want = round_to_half(want);
  const OutputDiff d = compare_outputs(got, !gated, want.data(), int64_t(pair_of.size()), cols, element_bound(g));
  if (r.detail.empty() && d.first_nonfinite >= 0) {
    const int64_t i = d.first_nonfinite;
    r.detail = what + " of pair " + std::to_string(pair_of[size_t(i / cols)]) + " column " + std::to_string(i % cols) +
               " = " + std::to_string(d.nonfinite_value) + " (never written?)";
  }
  if (r.detail.empty() && d.elements_over > 0) {
    const int64_t i = d.first_over;
    r.detail = std::to_string(d.elements_over) + " outputs of " + what +
               " outside the element-wise bound, the first pair " + std::to_string(pair_of[size_t(i / cols)]) +
               " column " + std::to_string(i % cols) + " = " + std::to_string(d.first_over_got) + ", expected " +
               std::to_string(d.first_over_want);
  }
  return d.ref2 > 0 ? std::sqrt(d.diff2 / d.ref2) : std::sqrt(d.diff2);
}

// Per pair: the projection of row in_row(p) of `in` ([rows][k] fp16) by the weights of the
// pair's expert's content, each content's pairs in one cpu::gemm (fp64).
template <class InRow>
std::vector<float> reference_projection(const MoeBatch& b, const std::vector<quant::PackedWeight>& ws,
                                        const gemm::Spec& g, const std::vector<int64_t>& pairs, const uint16_t* in,
                                        InRow in_row) {
  const int64_t cols = g.out_cols();
  std::vector<float> want(pairs.size() * size_t(cols), 0.f);
  for (int d = 0; d < kDistinctExperts; ++d) {
    std::vector<size_t> at;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (b.content(b.ids[size_t(pairs[i])]) == d) at.push_back(i);
    }
    if (at.empty()) continue;
    std::vector<uint16_t> x(at.size() * size_t(g.k));
    for (size_t j = 0; j < at.size(); ++j) {
      std::memcpy(&x[j * size_t(g.k)], in + size_t(in_row(pairs[at[j]]) * g.k), size_t(g.k) * 2);
    }
    std::vector<float> y(at.size() * size_t(cols));
    cpu::GemmEpilogue epi;
    epi.kind = g.epilogue == gemm::Epilogue::kSiluMul ? cpu::GemmEpilogue::kSiluMul : cpu::GemmEpilogue::kNone;
    cpu::gemm(ws[size_t(d)], x.data(), int64_t(at.size()), epi, y.data());
    for (size_t j = 0; j < at.size(); ++j) std::copy_n(&y[j * size_t(cols)], cols, &want[at[j] * size_t(cols)]);
  }
  return want;
}

CheckResult check_route(MoeBatch& b, CheckResult r) {
  const moe::Spec& s = b.spec;
  const cpu::MoeRoute want = cpu::moe_route(b.logits.data(), b.tokens, b.router());
  const auto ids = download<int32_t>(b.d_ids, size_t(b.pairs));
  const auto weights = download<float>(b.d_weights, size_t(b.pairs));
  const auto offsets = download<int32_t>(b.d_offsets, size_t(s.experts + 1));
  const auto sorted = download<int32_t>(b.d_sorted, size_t(b.pairs));
  r.metric = "max relative error of the routing weights (ids, offsets and sorted pairs bit-exact)";
  r.tolerance = kWeightTolerance;
  compare_ids(b, ids, want, r);
  for (int e = 0; e <= s.experts && r.detail.empty(); ++e) {
    if (offsets[size_t(e)] != want.offsets[size_t(e)]) {
      r.detail = "offsets[" + std::to_string(e) + "] = " + std::to_string(offsets[size_t(e)]) + ", expected " +
                 std::to_string(want.offsets[size_t(e)]);
    }
  }
  for (int64_t p = 0; p < b.pairs && r.detail.empty(); ++p) {
    if (sorted[size_t(p)] != want.sorted[size_t(p)]) {
      r.detail = "sorted[" + std::to_string(p) + "] = " + std::to_string(sorted[size_t(p)]) + ", expected " +
                 std::to_string(want.sorted[size_t(p)]);
    }
  }
  compare_weights(b, weights, want, r);
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

CheckResult check_projection(MoeBatch& b, CheckResult r) {
  const moe::Spec& s = b.spec;
  const gemm::Spec g = s.projection();
  const bool gated = s.op == moe::Op::kGateUp;
  const int64_t cols = g.out_cols();
  const size_t elem = gated ? 2 : 4;
  std::vector<uint8_t> got(b.out_bytes);
  b.d_out.download(got.data(), got.size());

  // The reference of the served pairs (once per batch: a tuning run checks every candidate on
  // the same inputs).
  if (b.want.empty()) {
    b.want.assign(size_t(b.pairs * cols), 0.f);
    b.served_pairs.assign(size_t(b.pairs), 0);
    std::vector<int64_t> ps;
    for (int64_t p = 0; p < b.pairs; ++p) {
      if (b.served(b.ids[size_t(p)])) ps.push_back(p), b.served_pairs[size_t(p)] = 1;
    }
    const std::vector<float> w =
        reference_projection(b, b.weights, g, ps, b.in.data(), [&](int64_t p) { return gated ? p / s.topk : p; });
    for (size_t i = 0; i < ps.size(); ++i) std::copy_n(&w[i * size_t(cols)], cols, &b.want[size_t(ps[i] * cols)]);
  }
  const std::vector<float>& want = b.want;
  const std::vector<uint8_t>& served = b.served_pairs;
  // Served rows compared as the gemm family compares (fp16 outputs against the rounded
  // reference); the others must be untouched.
  std::vector<uint8_t> got_served;
  std::vector<float> want_served;
  std::vector<int64_t> pair_of;
  for (int64_t p = 0; p < b.pairs; ++p) {
    const uint8_t* row = got.data() + size_t(p * cols) * elem;
    if (served[size_t(p)]) {
      got_served.insert(got_served.end(), row, row + size_t(cols) * elem);
      want_served.insert(want_served.end(), want.begin() + p * cols, want.begin() + (p + 1) * cols);
      pair_of.push_back(p);
    } else if (r.detail.empty()) {
      for (size_t i = 0; i < size_t(cols) * elem; ++i) {
        if (row[i] != kPoisonByte) {
          r.detail = "pair " + std::to_string(p) + " (expert " + std::to_string(b.ids[size_t(p)]) +
                     ", another launch's) was written";
          break;
        }
      }
    }
  }
  for (size_t i = size_t(b.pairs * cols) * elem; i < got.size() && r.detail.empty(); ++i) {
    if (got[i] != kPoisonByte) r.detail = "wrote past the last pair (byte " + std::to_string(i) + ")";
  }
  r.tolerance = gemm_tolerance(g);
  r.metric = "|gpu-ref|/|ref| (2-norm) over the served pairs, reference: CPU fp64 per expert";
  r.error = compare_projection(got_served.data(), want_served, pair_of, g, gated ? "h" : "y", r);
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

// out [tokens][hidden] fp16 against the exact fp64 sum of weights · rows ([pairs][hidden] fp32)
// per token in slot order (+ the shared expert), error over its bound (1 passes) into r.error.
// The kernel sums topk (+1) products in fp32 in an order and with fused multiply-adds of its
// own, then rounds once to fp16: its distance from the exact sum is at most one fp16 unit of
// the result (the rounding, also of a value the fp32 error moved across a rounding boundary)
// plus the fp32 error, (terms + 1) * 2^-24 of the terms' absolute sum. A bound relative to the
// result alone fails where the terms cancel (a sum near zero of terms near 2). weight_error:
// the kernel's weights may differ from `weights` by this much relative (op=decode routes
// itself), which adds that share of the routed terms' absolute sum.
void compare_combine(const MoeBatch& b, const std::vector<uint16_t>& got, const std::vector<float>& rows,
                     const std::vector<float>& weights, double weight_error, CheckResult& r) {
  const moe::Spec& s = b.spec;
  const int terms = s.topk + (b.shared.empty() ? 0 : 1);
  for (int64_t t = 0; t < b.tokens; ++t) {
    double gate = 1;
    if (s.shared == moe::Spec::Shared::kGated) gate = 1 / (1 + std::exp(-double(cpu::half_to_float(b.shared_gate[size_t(t)]))));
    for (int64_t n = 0; n < s.hidden; ++n) {
      double sum = 0, magnitude = 0;
      for (int k = 0; k < s.topk; ++k) {
        const int64_t p = t * s.topk + k;
        const double term = double(weights[size_t(p)]) * double(rows[size_t(p * s.hidden + n)]);
        sum += term, magnitude += std::abs(term);
      }
      const double routed = magnitude;
      if (!b.shared.empty()) {
        const double term = gate * cpu::half_to_float(b.shared[size_t(t * s.hidden + n)]);
        sum += term, magnitude += std::abs(term);
      }
      const double bound = half_ulp(sum) + (terms + 1) * std::ldexp(magnitude, -24) + weight_error * routed;
      const int64_t i = t * s.hidden + n;
      const double g = cpu::half_to_float(got[size_t(i)]);
      const double err = std::isfinite(g) ? std::abs(g - sum) / bound : INFINITY;
      if (!(err <= r.error)) r.error = err;
      if (!(err <= 1) && r.detail.empty()) {
        r.detail = "out[" + std::to_string(i) + "] = " + std::to_string(g) + ", exact " + std::to_string(sum) +
                   " (bound " + std::to_string(bound) + ")";
      }
    }
  }
  for (size_t i = size_t(b.tokens * s.hidden); i < got.size() && r.detail.empty(); ++i) {
    if (got[i] != 0xffff) r.detail = "wrote past the last token (element " + std::to_string(i) + ")";
  }
}

CheckResult check_combine(MoeBatch& b, CheckResult r) {
  std::vector<uint16_t> got(b.out_bytes / 2);
  b.d_out.download(got.data(), b.out_bytes);
  r.metric = "max |gpu-exact| / (one fp16 unit of the exact sum + (terms+1) 2^-24 sum |terms|)";
  r.tolerance = 1;
  compare_combine(b, got, b.rows, b.route_weights, 0, r);
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

// op=decode: the routing (ids bit-exact, weights within kWeightTolerance), h against gate_up's
// reference from x, y against down's reference from the kernel's own h, out against the exact
// combine of the kernel's y, each within its op's bound; and every counter back at 0. The
// error is the largest of the four errors over their bounds.
CheckResult check_decode(MoeBatch& b, CheckResult r) {
  const moe::Spec& s = b.spec;
  const gemm::Spec gu = s.projection(moe::Op::kGateUp), dn = s.projection(moe::Op::kDown);
  r.metric =
      "max over routing weights, h, y and out of error / bound (h, y: |gpu-ref|/|ref| 2-norm per gemm "
      "tolerance; out: the combine bound)";
  r.tolerance = 1;
  const auto ids = download<int32_t>(b.d_ids, size_t(b.pairs));
  const auto weights = download<float>(b.d_weights, size_t(b.pairs));
  compare_ids(b, ids, b.route, r);
  CheckResult w;
  compare_weights(b, weights, b.route, w);
  if (r.detail.empty()) r.detail = w.detail;
  double worst = w.error / kWeightTolerance;

  std::vector<int64_t> all(size_t(b.pairs));
  for (int64_t p = 0; p < b.pairs; ++p) all[size_t(p)] = p;
  std::vector<uint8_t> h(size_t(b.pairs * s.inter) * 2);
  b.d_h.download(h.data(), h.size());
  if (b.want.empty()) {
    b.want = reference_projection(b, b.weights, gu, all, b.in.data(), [&](int64_t p) { return p / s.topk; });
  }
  worst = std::max(worst, compare_projection(h.data(), b.want, all, gu, "h", r) / gemm_tolerance(gu));

  std::vector<uint16_t> h16(size_t(b.pairs * s.inter));
  std::memcpy(h16.data(), h.data(), h.size());
  std::vector<uint8_t> y(size_t(b.pairs * s.hidden) * 4);
  b.d_y.download(y.data(), y.size());
  const std::vector<float> want_y =
      reference_projection(b, b.down_weights, dn, all, h16.data(), [](int64_t p) { return p; });
  worst = std::max(worst, compare_projection(y.data(), want_y, all, dn, "y", r) / gemm_tolerance(dn));

  std::vector<float> rows(size_t(b.pairs * s.hidden));
  std::memcpy(rows.data(), y.data(), y.size());
  std::vector<uint16_t> got(b.out_bytes / 2);
  b.d_out.download(got.data(), b.out_bytes);
  CheckResult c;
  compare_combine(b, got, rows, b.route.weights, kWeightTolerance, c);
  if (r.detail.empty()) r.detail = c.detail;
  worst = std::max(worst, c.error);

  const auto counters = download<uint32_t>(b.d_workspace, b.workspace_bytes / 4);
  for (size_t i = 0; i < counters.size() && r.detail.empty(); ++i) {
    if (counters[i] != 0)
      r.detail = "workspace counter " + std::to_string(i) + " left at " + std::to_string(counters[i]);
  }
  r.error = std::isnan(worst) ? INFINITY : worst;
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

void launch_batch(const LoadedKernel& kernel, const moe::Spec& spec, const moe::Config& config, const MoeBatch& b,
                  CUstream stream, int routing = 0) {
  launch(kernel, moe::make_call(spec, config, b.args(routing)), stream);
}

CheckResult run_check(MoeBatch& b, const moe::Config& config, const LoadedKernel& kernel, uint64_t seed) {
  b.poison();
  launch_batch(kernel, b.spec, config, b, nullptr);
  sync("running " + b.spec.to_string() + " [" + config.to_string() + "]");
  CheckResult r;
  r.rows = b.tokens, r.seed = seed;
  switch (b.spec.op) {
    case moe::Op::kRoute: return check_route(b, r);
    case moe::Op::kCombine: return check_combine(b, r);
    case moe::Op::kDecode:
      return check_decode(b, r);
    default: return check_projection(b, r);
  }
}

// decode's peer: the same layer as the backend runs it without op=decode, route, gate_up, down
// and combine in four launches at their default configs, on the batch's inputs and routings
// (its ids, weights, h, y and out buffers too).
class FourLaunches {
 public:
  FourLaunches(const MoeBatch& b, const Workload::OwnKernels& load) {
    const moe::Op ops[] = {moe::Op::kRoute, moe::Op::kGateUp, moe::Op::kDown, moe::Op::kCombine};
    for (size_t i = 0; i < 4; ++i) {
      specs_[i] = b.spec;
      specs_[i].op = ops[i];
      const Workload::OwnKernel k = load(specs_[i].to_string());
      kernels_[i] = k.kernel;
      configs_[i] = moe::Config::parse(specs_[i], k.config);
    }
    offsets_ = DeviceBuffer(size_t(b.spec.experts + 1) * 4 + 64);
    sorted_ = DeviceBuffer(size_t(b.pairs) * 4 + 64);
    workspace_ = DeviceBuffer(size_t(std::max<int64_t>(16, moe::workspace_bytes(specs_[0], configs_[0], b.tokens))));
    workspace_.fill_bytes(0);  // the route kernel leaves its counter at 0
  }

  void launch(const MoeBatch& b, int routing, CUstream stream) const {
    moe::Args a = b.args(routing);  // decode's: logits, x, h, y, out, ids, weights, shared
    a.offsets = offsets_.ptr(), a.sorted = sorted_.ptr(), a.workspace = workspace_.ptr();
    for (size_t i = 0; i < 4; ++i) {
      if (specs_[i].op == moe::Op::kGateUp) a.experts = b.d_experts.weights();
      if (specs_[i].op == moe::Op::kDown) a.experts = b.d_down.weights();
      onecat::launch(*kernels_[i], moe::make_call(specs_[i], configs_[i], a), stream);
    }
  }

 private:
  moe::Spec specs_[4];
  const LoadedKernel* kernels_[4] = {};
  moe::Config configs_[4];
  DeviceBuffer offsets_, sorted_, workspace_;
};

// Tuning: the inputs of the check, and the timing routings that keep one launch's experts out of
// the L2 of the next few.
class MoeWorkload final : public Workload {
 public:
  MoeWorkload(const std::string& spec_text, int64_t m, uint64_t seed)
      : spec_(moe::Spec::parse(spec_text)), seed_(seed), batch_(spec_, m, seed, false, true) {}

  // Launch i on routing i mod the routings (the tuner's median spans skewed and uniform ones).
  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    launch_batch(kernel, spec_, moe::Config::parse(spec_, config), batch_, stream, i % batch_.routings());
  }
  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return run_check(batch_, moe::Config::parse(spec_, config), kernel, seed_);
  }
  // route: logits in, routing out; gate_up/down: the touched experts' weights, the input rows
  // and the outputs; combine: rows in, fp16 out.
  Traffic traffic() const override {
    const MoeBatch& b = batch_;
    switch (spec_.op) {
      case moe::Op::kRoute:
        return {double(b.logits.size()) * 2 + double(b.pairs) * 12 + double(spec_.experts + 1) * 4, 0};
      case moe::Op::kCombine:
        return {double(b.rows.size()) * 4 + double(b.pairs) * 4 + double(b.tokens * spec_.hidden) * 2, 0};
      case moe::Op::kDecode: {
        // The layer's bytes: both projections of the touched experts, x, out and the logits
        // (h and y stay in L2).
        const gemm::Spec gu = spec_.projection(moe::Op::kGateUp), dn = spec_.projection(moe::Op::kDown);
        const double rows = double(b.tokens * spec_.hidden) * 4 + double(b.logits.size()) * 2;
        return {touched_experts() * double(b.weights[0].bytes() + b.down_weights[0].bytes()) + rows,
                2.0 * double(b.pairs) * (double(gu.n) * double(gu.k) + double(dn.n) * double(dn.k))};
      }
      default: {
        const gemm::Spec g = spec_.projection();
        const double experts = touched_experts();
        const double rows_in = spec_.op == moe::Op::kGateUp ? double(b.tokens) : double(b.pairs);
        const double out = double(b.pairs) * double(g.out_cols()) * (spec_.op == moe::Op::kGateUp ? 2 : 4);
        return {experts * double(b.weights[0].bytes()) + rows_in * double(g.k) * 2 + out,
                2.0 * double(b.pairs) * double(g.n) * double(g.k)};
      }
    }
  }

  void use_own_kernels(const OwnKernels& load) override {
    if (spec_.op == moe::Op::kDecode) peer_ = std::make_unique<FourLaunches>(batch_, load);
  }
  std::string peer_name() const override { return peer_ ? "four launches" : ""; }
  void launch_peer(int i, CUstream stream) override { peer_->launch(batch_, i % batch_.routings(), stream); }
  // out of op=decode against out of the four launches, on the check's routing. The four launches
  // run on every timing routing first, back to back as the timing runs them (one routing's
  // launches overlapping the next one's under programmatic dependent launch), the check's last.
  double error_vs_peer(const LoadedKernel& kernel, const std::string& config) override {
    const size_t count = size_t(batch_.tokens * spec_.hidden);
    auto out_of = [&](const std::function<void()>& run) {
      batch_.d_out.fill_bytes(kPoisonByte);
      run();
      sync("running " + spec_.to_string() + " for the peer comparison");
      return download<uint16_t>(batch_.d_out, count);
    };
    const std::vector<uint16_t> peer = out_of([&] {
      for (int r = batch_.routings() - 1; r >= 0; --r) peer_->launch(batch_, r, nullptr);
    });
    const std::vector<uint16_t> got =
        out_of([&] { launch_batch(kernel, spec_, moe::Config::parse(spec_, config), batch_, nullptr); });
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = cpu::half_to_float(peer[i]);
    const OutputDiff d = compare_outputs(reinterpret_cast<const uint8_t*>(got.data()), false, want.data(),
                                         batch_.tokens, spec_.hidden, ElementBound{});
    const double e = d.ref2 > 0 ? std::sqrt(d.diff2 / d.ref2) : std::sqrt(d.diff2);
    return d.first_nonfinite >= 0 || std::isnan(e) ? INFINITY : e;
  }

 private:
  // Launches cycle through the routings: the mean of their touched experts.
  double touched_experts() const {
    double sum = 0;
    for (int r = 0; r < batch_.routings(); ++r) sum += count_touched(batch_.ids_of(r), spec_.experts);
    return sum / batch_.routings();
  }

  moe::Spec spec_;
  uint64_t seed_;
  MoeBatch batch_;
  std::unique_ptr<FourLaunches> peer_;
};

}  // namespace

CheckResult check_moe(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel,
                      int64_t tokens, uint64_t seed) {
  const moe::Spec spec = moe::Spec::parse(spec_text);
  const moe::Config config = moe::Config::parse(spec, config_text);
  MoeBatch b(spec, tokens, seed, true, false);
  return run_check(b, config, kernel, seed);
}

std::unique_ptr<Workload> moe_workload(const std::string& spec, int64_t m, uint64_t seed) {
  return std::make_unique<MoeWorkload>(spec, m, seed);
}

}  // namespace onecat
