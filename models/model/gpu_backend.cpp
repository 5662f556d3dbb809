#include "models/model/gpu_backend.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "cache/record.h"
#include "codegen/attention/emit.h"
#include "codegen/attention/op.h"
#include "codegen/embedding/op.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/op.h"
#include "codegen/gemm/space.h"
#include "codegen/moe/emit.h"
#include "codegen/moe/experts.h"
#include "codegen/moe/op.h"
#include "codegen/moe/space.h"
#include "codegen/rmsnorm/op.h"
#include "codegen/rope/op.h"
#include "codegen/sampling/op.h"
#include "models/checkpoint/load_progress.h"
#include "runtime/cpu/rope.h"
#include "runtime/engine/prepared_op.h"
#include "runtime/engine/session.h"

namespace onecat::model {
namespace {

using GemmOp = PreparedOp<gemm::Spec, gemm::Config, gemm::Args>;
using NormOp = PreparedOp<rmsnorm::Spec, rmsnorm::Config, rmsnorm::Args>;
using AttentionOp = PreparedOp<attention::Spec, attention::Config, attention::Args>;
using RopeOp = PreparedOp<rope::Spec, rope::Config, rope::Args>;
using EmbeddingOp = PreparedOp<embedding::Spec, embedding::Config, embedding::Args>;
using ArgmaxOp = PreparedOp<sampling::Spec, sampling::Config, sampling::ArgmaxArgs>;
using SampleOp = PreparedOp<sampling::Spec, sampling::Config, sampling::Args>;
using MoeOp = PreparedOp<moe::Spec, moe::Config, moe::Args>;

std::string s(int64_t v) { return std::to_string(v); }

// A linear layer on the GPU: its packed buffers and the gemm op of its shape and epilogue.
struct DeviceLinear {
  GemmOp* op = nullptr;
  // Decode steps that fuse norms (GpuBackend::fuses_norms): qkv and gate_up's op with the norm
  // before them (norm=rms), o and down's with the residual add after them (epi=residual).
  GemmOp* fused = nullptr;
  DeviceBuffer qweight, scales, zeros, perm, bias;
  DevicePtr weight = 0;  // qweight, or the embedding table for a tied lm_head
  float global_scale = 1.f;
  Epilogue epilogue = Epilogue::kNone;
};

// One projection (gate_up or down) of a MoE layer's experts that share a weight format,
// stacked expert after expert in each buffer, and the op that runs them. A layer whose experts
// all share one format has one group and no slot table; one that keeps some experts in another
// format (a checkpoint's modules_to_not_convert) has a group per format, each with a slot table
// (expert → its place in the group's buffers, -1 for the other groups' experts).
struct ExpertGroup {
  MoeOp* op = nullptr;
  DeviceBuffer qweight, scales, zeros, perm, global_scales, slot;
  int64_t qweight_stride = 0, scales_stride = 0, zeros_stride = 0;
  bool has_slots = false;

  moe::ExpertWeights weights() const {
    return {qweight.ptr(),       scales.ptr(),   zeros.ptr(),   perm.ptr(),
            global_scales.ptr(), qweight_stride, scales_stride, zeros_stride};
  }
};

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  return DeviceBuffer::from_host(v.data(), v.size() * sizeof(T));
}

std::string gemm_spec(const quant::PackedWeight& w, bool out_f32, Epilogue epilogue, bool norm = false) {
  const char* epi = epilogue == Epilogue::kBias       ? "bias"
                    : epilogue == Epilogue::kSiluMul  ? "silu_mul"
                    : epilogue == Epilogue::kResidual ? "residual"
                                                      : "none";
  return "gemm:n=" + s(w.n) + ",k=" + s(w.k) + ",fmt=" + std::string(quant::format_name(w.format)) +
         ",group=" + s(w.group) + ",out=" + (out_f32 ? "f32" : "f16") + ",epi=" + epi +
         ",act_order=" + (w.perm.empty() ? "0" : "1") + (norm ? ",norm=rms" : "");
}

// The buckets a PreparedOp serves for counts 1..max.
std::vector<int64_t> buckets_up_to(int64_t max) {
  std::vector<int64_t> out;
  for (int64_t b = 1;; b *= 2) {
    out.push_back(b);
    if (b >= max || b >= kMaxTuningBucket) break;
  }
  return out;
}

}  // namespace

struct GpuBackend::Impl {
  Session& session;
  models::ModelConfig config;
  BackendLimits limits;
  CUstream stream = nullptr;

  // Ops, one per distinct spec; the linears point at theirs.
  std::map<std::string, std::unique_ptr<GemmOp>> gemm_ops;
  // The fused decode ops (DeviceLinear::fused), prepared for up to fused_max_tokens tokens only.
  std::map<std::string, std::unique_ptr<GemmOp>> fused_ops;
  int64_t fused_max_tokens = 0;  // 0: this model's forward never fuses norms
  std::unique_ptr<NormOp> norm, norm_residual;
  std::unique_ptr<AttentionOp> decode, prefill;
  std::map<int, std::unique_ptr<AttentionOp>> verify;  // by block length, made by prepare_verify
  std::string attention_shape;                         // heads, page and window of the attention specs
  std::unique_ptr<RopeOp> rope;
  std::unique_ptr<EmbeddingOp> embed, gather;
  std::unique_ptr<ArgmaxOp> argmax;
  // op=sample without and with the top logprobs (the kernel's passes for them only when asked);
  // made by prepare_sampling, so a model whose engine samples on the host compiles neither.
  std::unique_ptr<SampleOp> sample, sample_logprobs;
  // Mixture of experts: routing and the slot-ordered sum, and the experts' ops by spec.
  std::unique_ptr<MoeOp> moe_route, moe_combine;
  std::map<std::string, std::unique_ptr<MoeOp>> moe_ops;
  // The one-launch layer (op=decode) by spec, for steps of up to moe_decode_max tokens (0: none,
  // e.g. experts in several weight formats; then every step takes the four ops above).
  std::map<std::string, std::unique_ptr<MoeOp>> moe_decode_ops;
  int64_t moe_decode_max = 0;

  // Weights.
  DeviceBuffer embed_table, final_norm, inv_freq;
  float attention_factor = 1.f;
  struct Layer {
    DeviceBuffer input_norm, post_attention_norm, q_norm, k_norm;
    DeviceLinear qkv, o, gate_up, down;
    DeviceLinear router;                                  // MoE: the router, fp16 logits out
    DeviceLinear shared_gate;  // MoE with a shared expert (gate_up and down its weights): its gate, n = 1
    std::vector<ExpertGroup> expert_gate_up, expert_down;  // MoE: by weight format
    MoeOp* moe_decode = nullptr;  // MoE with one weight format: the layer as one op=decode launch
    DeviceBuffer k_cache, v_cache;
    DeviceBuffer kv_scales;  // fp8 caches: [k_scale, v_scale] fp32 (models::LoadedLayer)
    CUdeviceptr k_scale() const { return kv_scales.ptr(); }  // 0 for an fp16 cache
    CUdeviceptr v_scale() const { return kv_scales.ptr() ? kv_scales.ptr() + 4 : 0; }
  };
  std::vector<Layer> layers;
  DeviceLinear lm_head;
  size_t weight_bytes = 0, kv_bytes = 0;

  // Activations [max_tokens][width] fp16, the gathered logit rows, the logits (fp32).
  std::array<DeviceBuffer, kActCount> acts;
  DeviceBuffer logit_inputs, logits;
  SplitWorkspace workspace;
  DeviceBuffer gemm_scratch;                  // gemm strategy=cublas, for the largest launch up to the limits
  DeviceBuffer argmax_workspace, argmax_ids;  // the workspace zeroed once (sampling/op.h)
  // op=sample's rows [max_sequences]: RowParams, tokens, token logprobs, top ids and logprobs
  // [rows][kMaxLogprobs], the history CSR's offsets; its ids and hash table grow with the histories.
  DeviceBuffer sample_params, sample_tokens, sample_logprob, sample_top_ids, sample_top_logprobs, history_offsets;
  DeviceBuffer history_ids, history_table;
  DeviceBuffer moe_route_workspace;           // likewise (moe/op.h)
  DeviceBuffer moe_decode_workspace;          // likewise
  // MoE: router logits [tokens][experts] fp16, the routing (moe/op.h), the experts' gate_up
  // outputs [pairs][inter] fp16 and down outputs [pairs][hidden] fp32.
  DeviceBuffer moe_logits, moe_ids, moe_weights, moe_offsets, moe_sorted, moe_h, moe_y;
  DeviceBuffer moe_shared_h, moe_shared, moe_shared_logit;  // the shared expert's h, output, gate logit

  // The step's batch: its arrays at fixed offsets of one page-locked staging buffer and of one
  // device buffer, so begin() sends them up in one asynchronous copy (a captured step keeps
  // the device addresses).
  struct Slice {
    const Impl* g = nullptr;
    size_t offset = 0, bytes = 0;
    CUdeviceptr ptr() const { return g->batch_device.ptr() + offset; }
    std::byte* host() const { return g->batch_host.data() + offset; }
  };
  PinnedBuffer batch_host;
  DeviceBuffer batch_device;
  // Host-sampled logit rows land here first (read_logit_rows): page-locked, so every row's copy
  // is queued at once and one sync waits for them all; grown to the most rows read so far.
  PinnedBuffer host_rows;
  Slice ids, positions, slots, cu_q, seq_lens, block_table, logit_rows;
  int64_t tokens = 0, logit_count = 0;
  // The step's attention launches after the decodes: runs of verify blocks of one length q
  // (the verify kernel of that q), then the sequences the prefill kernel takes — verify blocks
  // longer than prepare_verify's, then the prefill chunks — as two ranges.
  struct VerifyRun {
    int first = 0, count = 0, q = 0;
    int64_t first_row = 0;  // its first sequence's first token (runs before it have other lengths)
  };
  std::vector<VerifyRun> verify_runs;
  struct PrefillRange {
    int first = 0, end = 0;
    int64_t tokens = 0, max_q = 0;
  };
  PrefillRange verify_rest, prefill_part;
  int64_t read_rows = 0;  // the logit rows the reads return: logit_count, or a padded step's real ones
  Session::PrepareStats kernels;  // the constructor's, and the seconds they took
  double kernel_seconds = 0;
  int sequences = 0, decode_sequences = 0;
  // The step's GPU time, begin()'s copy to the last launch before the read: an event pair.
  CUevent step_start = nullptr, step_end = nullptr;
  double last_step_seconds = 0;

  // Profiling: an event pair per launch of the step, timed in read_logits.
  struct Timing {
    bool on = false;
    std::vector<CUevent> starts, ends;
    std::vector<const char*> labels;
    size_t used = 0;
    std::map<std::pair<bool, std::string>, OpTime> totals;
    int64_t decode_steps = 0, prefill_steps = 0;
  } timing;

  // Brackets one launch with events while profiling (no-op otherwise). The end event is
  // recorded even when the launch throws, so pairs stay matched; its error is not checked
  // there (a destructor), the next synchronisation reports a broken stream.
  class Timed {
   public:
    Timed(Impl& g, const char* label) : g_(g) {
      if (!g_.timing.on) return;
      const Driver& d = Driver::require_gpu();
      Timing& t = g_.timing;
      if (t.used == t.starts.size()) {
        CUevent a = nullptr, b = nullptr;
        d.check(d.cuEventCreate(&a, 0), "cuEventCreate", "profiling a forward step");
        d.check(d.cuEventCreate(&b, 0), "cuEventCreate", "profiling a forward step");
        t.starts.push_back(a), t.ends.push_back(b), t.labels.push_back(label);
      }
      t.labels[t.used] = label;
      d.check(d.cuEventRecord(t.starts[t.used], g_.stream), "cuEventRecord", "profiling a forward step");
      active_ = true;
    }
    ~Timed() {
      if (!active_) return;
      Timing& t = g_.timing;
      Driver::require_gpu().cuEventRecord(t.ends[t.used], g_.stream);
      ++t.used;
    }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;

   private:
    Impl& g_;
    bool active_ = false;
  };

  // Waits for the step's work, then adds the profiled launches' times to the totals.
  void finish_step() {
    const Driver& d = Driver::require_gpu();
    d.check(d.cuEventRecord(step_end, stream), "cuEventRecord", "the forward step");
    d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize", "the forward step");
    float ms = 0;
    d.check(d.cuEventElapsedTime(&ms, step_start, step_end), "cuEventElapsedTime", "the forward step");
    last_step_seconds = double(ms) / 1e3;
    collect_timing();
  }

  // After the step's synchronisation: the pairs' times into the totals.
  void collect_timing() {
    Timing& t = timing;
    if (!t.on) return;
    const Driver& d = Driver::require_gpu();
    const bool decode_step = decode_sequences == sequences;
    for (size_t i = 0; i < t.used; ++i) {
      float ms = 0;
      d.check(d.cuEventElapsedTime(&ms, t.starts[i], t.ends[i]), "cuEventElapsedTime", "profiling a forward step");
      OpTime& o = t.totals[{decode_step, t.labels[i]}];
      o.op = t.labels[i], o.decode = decode_step, ++o.launches, o.ms += ms;
    }
    t.used = 0;
    ++(decode_step ? t.decode_steps : t.prefill_steps);
  }

  struct Graph {
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
  };
  std::map<int, Graph> graphs;
  void drop_graphs() {
    const Driver& d = Driver::require_gpu();
    for (auto& [key, graph] : graphs) {
      if (graph.exec) d.cuGraphExecDestroy(graph.exec);
      if (graph.graph) d.cuGraphDestroy(graph.graph);
    }
    graphs.clear();
  }

  Impl(Session& s, const models::LoadedModel& model, const BackendLimits& l)
      : session(s), config(model.config), limits(l) {}

  GemmOp* gemm_op(const std::string& spec) {
    auto& op = gemm_ops[spec];
    if (!op) op = std::make_unique<GemmOp>(session, spec);
    return op.get();
  }

  DeviceLinear linear(const quant::PackedWeight& w, const std::vector<uint16_t>& bias, Epilogue epilogue,
                      bool out_f32 = false) {
    DeviceLinear d;
    d.op = gemm_op(gemm_spec(w, out_f32, epilogue));
    d.qweight = upload(w.qweight);
    d.scales = upload(w.scales);
    d.zeros = upload(w.zeros);
    d.perm = upload(w.perm);
    d.bias = upload(bias);
    d.weight = d.qweight.ptr();
    d.global_scale = w.global_scale;
    d.epilogue = epilogue;
    weight_bytes += w.bytes() + bias.size() * 2;
    return d;
  }

  // The norm's weight [hidden] on the GPU.
  CUdeviceptr norm_weight(Norm norm) const {
    return norm.kind == Norm::kFinal   ? final_norm.ptr()
           : norm.kind == Norm::kInput ? layers[size_t(norm.layer)].input_norm.ptr()
                                       : layers[size_t(norm.layer)].post_attention_norm.ptr();
  }

  // w's fused op: its spec with the norm before it (qkv, gate_up) or the residual add after it.
  void add_fused(DeviceLinear& d, const quant::PackedWeight& w, bool norm) {
    const std::string spec = gemm_spec(w, false, norm ? d.epilogue : Epilogue::kResidual, norm);
    auto& op = fused_ops[spec];
    if (!op) op = std::make_unique<GemmOp>(session, spec);
    d.fused = op.get();
  }

  // y = x · Wᵀ (+ the linear's epilogue) for m rows, timed under `label`; with `fused`, w's
  // fused op (norm_weight: the norm's, for norm=rms; else y ← y + x · Wᵀ).
  void run_linear(const DeviceLinear& w, CUdeviceptr y, CUdeviceptr x, int64_t m, const char* label, bool fused = false,
                  CUdeviceptr norm_weight = 0) {
    gemm::Args a;
    a.y = y, a.x = x, a.qweight = w.weight, a.scales = w.scales.ptr(), a.zeros = w.zeros.ptr();
    a.perm = w.perm.ptr(), a.global_scale = w.global_scale, a.bias = w.bias.ptr(), a.m = m;
    if (fused) {
      if (!w.fused || m > fused_max_tokens) throw Error("GPU backend: a fused gemm this model did not prepare");
      a.residual = y, a.norm_weight = norm_weight, a.norm_eps = float(config.rms_norm_eps);
      Timed timed(*this, label);
      w.fused->launch(a, m, stream);  // a gemv: no workspace
      return;
    }
    GemmOp& op = *w.op;
    const gemm::Config& config = op.config(m);
    const int64_t floats = gemm::workspace_floats(op.spec(), config, m);
    const int64_t counters = gemm::workspace_counters(op.spec(), config, m);
    // Sized at start-up for the configs dispatched then; a dispatch changed since (a tune in the
    // same process) may need more, which must not run past the buffers.
    if (!workspace.fits(floats, counters) || size_t(gemm::scratch_bytes(op.spec(), config, m)) > gemm_scratch.bytes()) {
      throw Error(op.spec().to_string() + " at " + std::to_string(m) + " tokens now dispatches " + config.to_string() +
                  ", whose workspace this model did not reserve at start-up; load the model again after tuning");
    }
    a.partial = workspace.partial(floats), a.counters = workspace.counters(counters);
    a.scratch = gemm_scratch.ptr();
    Timed timed(*this, label);
    op.launch(a, m, stream);
  }

  // The experts' projection `which` (gate_up or down) grouped by weight format.
  std::vector<ExpertGroup> expert_groups(const std::vector<models::LoadedExpert>& experts, moe::Op which) {
    const models::ModelConfig& c = config;
    auto weight = [&](size_t e) -> const quant::PackedWeight& {
      return which == moe::Op::kGateUp ? experts[e].gate_up : experts[e].down;
    };
    std::vector<std::string> keys;
    for (size_t e = 0; e < experts.size(); ++e) {
      const std::string k = moe::weight_fields(weight(e));
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    std::vector<ExpertGroup> out;
    for (const std::string& k : keys) {
      std::vector<const quant::PackedWeight*> members;
      std::vector<size_t> ids;
      std::vector<int32_t> slot(experts.size(), -1);
      for (size_t e = 0; e < experts.size(); ++e) {
        if (moe::weight_fields(weight(e)) != k) continue;
        slot[e] = int32_t(members.size());
        members.push_back(&weight(e)), ids.push_back(e);
      }
      const moe::StackedExperts st = moe::stack_experts(members, [&](size_t i) {
        return std::string("expert ") + s(int64_t(ids[i])) + "'s " + (which == moe::Op::kGateUp ? "gate_up" : "down");
      });
      const std::string spec =
          moe::projection_spec(which, c.experts, c.experts_per_token, c.hidden, c.moe_intermediate, k);
      auto& op = moe_ops[spec];
      if (!op) op = std::make_unique<MoeOp>(session, spec);
      ExpertGroup grp;
      grp.op = op.get();
      grp.qweight = upload(st.qweight), grp.scales = upload(st.scales), grp.zeros = upload(st.zeros);
      grp.perm = upload(st.perm), grp.global_scales = upload(st.global_scales);
      grp.qweight_stride = st.qweight_stride, grp.scales_stride = st.scales_stride, grp.zeros_stride = st.zeros_stride;
      grp.has_slots = keys.size() > 1;
      if (grp.has_slots) grp.slot = upload(slot);
      weight_bytes += st.qweight.size() + st.scales.size() + st.zeros.size();
      out.push_back(std::move(grp));
    }
    return out;
  }

  CUdeviceptr act(Act a) const { return acts[size_t(a)].ptr(); }

  // Launches an attention op over a.batch sequences from the step's sequence `first` on (a.q,
  // a.out, a.max_q set by the caller): the layer's cache, those sequences' block-table rows,
  // seq_lens and cu_q entries, the split workspace of its config at m.
  void launch_attention(AttentionOp& op, const Layer& l, int first, attention::Args a, int64_t m, const char* label) {
    a.k_cache = l.k_cache.ptr(), a.v_cache = l.v_cache.ptr(), a.k_scale = l.k_scale(), a.v_scale = l.v_scale();
    a.block_table = block_table.ptr() + CUdeviceptr(size_t(first) * size_t(limits.row_pages()) * 4);
    a.max_pages = int(limits.row_pages()), a.seq_lens = seq_lens.ptr() + CUdeviceptr(first * 4);
    a.cu_q = cu_q.ptr() + CUdeviceptr(first * 4), a.sm_scale = config.attention_scale();
    a.tables_from_host = true;  // begin() copies them from the host ahead of the step's kernels
    a.partial = workspace.partial(attention::workspace_floats(op.spec(), op.config(m), a.batch));
    a.counters = workspace.counters(attention::workspace_counters(op.spec(), op.config(m), a.batch));
    Timed timed(*this, label);
    op.launch(a, m, stream);
  }
};

GpuBackend::GpuBackend(Session& session, const models::LoadedModel& model, const BackendLimits& limits)
    : impl_(std::make_unique<Impl>(session, model, limits)) {
  Impl& g = *impl_;
  const models::ModelConfig& c = g.config;
  const Driver& d = Driver::require_gpu();
  limits.check("GPU backend");
  // Sizing the KV pool from memory: what the GPU has free before onecat allocates anything.
  const bool fill_memory = limits.kv_pages == 0;
  size_t free_at_start = 0, total_memory = 0;
  if (fill_memory) d.check(d.cuMemGetInfo(&free_at_start, &total_memory), "cuMemGetInfo", "sizing the KV cache");
  d.check(d.cuStreamCreate(&g.stream, 0), "cuStreamCreate", "the GPU backend's stream");
  d.check(d.cuEventCreate(&g.step_start, 0), "cuEventCreate", "the GPU backend's step timing");
  d.check(d.cuEventCreate(&g.step_end, 0), "cuEventCreate", "the GPU backend's step timing");

  const int64_t kv_width = c.kv_heads * c.head_dim;
  const std::string heads = "heads=" + s(c.heads) + ",kv_heads=" + s(c.kv_heads) + ",dim=" + s(c.head_dim);
  const std::string page = ",page=" + s(limits.page_size) + ",kv=" + models::kv_cache_spec_text(limits.kv_dtype);
  const std::string window = ",window=" + s(c.sliding_window);

  // Weights, each linear with the op of its shape.
  g.embed_table = upload(model.embed_tokens);
  g.final_norm = upload(model.final_norm);
  g.weight_bytes += model.embed_tokens.size() * 2 + model.final_norm.size() * 2;
  const cpu::RopeTable table = cpu::rope_table(c.rope, int(c.head_dim));
  g.inv_freq = upload(table.inv_freq);
  g.attention_factor = table.attention_factor;
  g.layers.resize(model.layers.size());
  const size_t page_bytes =  // K or V of one layer
      size_t(limits.page_size) * size_t(kv_width) * size_t(models::kv_cache_element_bytes(limits.kv_dtype));

  // The forward fuses norms in decode steps of dense models without an o_proj bias (forward.cpp)
  // up to the tokens whose gemm default is the gemv.
  const int64_t fused_most = models::gpu_fused_norm_max_tokens(session.arch());
  bool fuse = limits.fused_norms && !c.is_moe() && fused_most > 0;
  for (const models::LoadedLayer& l : model.layers) fuse = fuse && l.o_bias.empty();
  if (fuse) g.fused_max_tokens = std::min<int64_t>(fused_most, limits.max_tokens);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const models::LoadedLayer& from = model.layers[i];
    Impl::Layer& to = g.layers[i];
    to.input_norm = upload(from.input_norm);
    to.post_attention_norm = upload(from.post_attention_norm);
    if (limits.kv_dtype != models::KvCacheDtype::kF16) {
      to.kv_scales = upload(std::vector<float>{from.k_scale, from.v_scale});
    }
    to.q_norm = upload(from.q_norm);
    to.k_norm = upload(from.k_norm);
    to.qkv = g.linear(from.qkv, from.qkv_bias, from.qkv_bias.empty() ? Epilogue::kNone : Epilogue::kBias);
    to.o = g.linear(from.o, from.o_bias, from.o_bias.empty() ? Epilogue::kNone : Epilogue::kBias);
    if (c.is_moe()) {
      to.router = g.linear(from.router, {}, Epilogue::kNone);
      to.expert_gate_up = g.expert_groups(from.experts, moe::Op::kGateUp);
      to.expert_down = g.expert_groups(from.experts, moe::Op::kDown);
      if (c.has_shared_expert()) to.shared_gate = g.linear(from.shared_gate, {}, Epilogue::kNone);
    }
    if (!c.is_moe() || c.has_shared_expert()) {  // the dense MLP, or the shared expert's
      to.gate_up = g.linear(from.gate_up, {}, Epilogue::kSiluMul);
      to.down = g.linear(from.down, {}, Epilogue::kNone);
    }
    if (fuse) {
      g.add_fused(to.qkv, from.qkv, true);
      g.add_fused(to.o, from.o, false);
      g.add_fused(to.gate_up, from.gate_up, true);
      g.add_fused(to.down, from.down, false);
    }
    g.weight_bytes +=
        (from.input_norm.size() + from.post_attention_norm.size() + from.q_norm.size() + from.k_norm.size()) * 2;
  }
  if (model.lm_head) {
    g.lm_head = g.linear(*model.lm_head, {}, Epilogue::kNone, true);
  } else {
    // Tied: the embedding table is the lm_head's fp16 weight, [vocab][hidden].
    quant::PackedWeight tied;
    tied.n = c.vocab, tied.k = c.hidden;
    g.lm_head.op = g.gemm_op(gemm_spec(tied, true, Epilogue::kNone));
    g.lm_head.weight = g.embed_table.ptr();
  }

  // The other ops.
  g.norm = std::make_unique<NormOp>(session, "rmsnorm:hidden=" + s(c.hidden) + ",dtype=f16,residual=0");
  g.norm_residual = std::make_unique<NormOp>(session, "rmsnorm:hidden=" + s(c.hidden) + ",dtype=f16,residual=1");
  g.rope = std::make_unique<RopeOp>(session,
                                    "rope:" + heads + ",qk_norm=" + (c.qk_norm ? "1" : "0") + ",kv_out=pages" + page);
  g.decode = std::make_unique<AttentionOp>(session, "attention:op=decode," + heads + page + window);
  g.prefill = std::make_unique<AttentionOp>(session, "attention:op=prefill," + heads + page + ",causal=1" + window);
  g.attention_shape = heads + page + window;
  g.embed = std::make_unique<EmbeddingOp>(session, "embedding:vocab=" + s(c.vocab) + ",hidden=" + s(c.hidden));
  g.gather =
      std::make_unique<EmbeddingOp>(session, "embedding:vocab=" + s(limits.max_tokens) + ",hidden=" + s(c.hidden));
  g.argmax = std::make_unique<ArgmaxOp>(session, "sampling:op=argmax,vocab=" + s(c.vocab));
  if (c.is_moe()) {
    const std::string topk = ",topk=" + s(c.experts_per_token);
    g.moe_route = std::make_unique<MoeOp>(
        session, "moe:op=route,experts=" + s(c.experts) + topk + ",norm=" + (c.norm_topk_prob ? "1" : "0"));
    g.moe_combine = std::make_unique<MoeOp>(session, "moe:op=combine" + topk + ",hidden=" + s(c.hidden) +
                                                         (c.has_shared_expert() ? ",shared=gated" : ""));
    // Decode steps take the whole layer in one launch where a layer's experts share one weight
    // format in both projections and it is faster (codegen/moe/space.h decode_layer_tokens: one
    // token with 4-bit weights); ONECAT_MOE_DECODE=0 keeps the four launches (to measure it).
    const char* decode_env = std::getenv("ONECAT_MOE_DECODE");
    const bool one_launch = !(decode_env && std::strcmp(decode_env, "0") == 0);
    for (Impl::Layer& l : g.layers) {
      if (!one_launch) break;
      if (l.expert_gate_up.size() != 1 || l.expert_down.size() != 1) continue;
      const moe::Spec up = l.expert_gate_up[0].op->spec(), down = l.expert_down[0].op->spec();
      if (up.format != down.format || up.group != down.group || up.act_order != down.act_order) continue;
      moe::Spec d = up;
      d.op = moe::Op::kDecode;
      d.norm = c.norm_topk_prob;
      d.shared = c.has_shared_expert() ? moe::Spec::Shared::kGated : moe::Spec::Shared::kNone;
      if (moe::decode_layer_tokens(d) < 1) continue;
      auto& op = g.moe_decode_ops[d.to_string()];
      if (!op) op = std::make_unique<MoeOp>(session, d.to_string());
      l.moe_decode = op.get();
      g.moe_decode_max = std::min(moe::decode_layer_tokens(d), limits.max_tokens);
    }
  }

  // Every kernel of every bucket now (in parallel, through the cache), so no step compiles.
  const std::vector<int64_t> token_buckets = buckets_up_to(limits.max_tokens);
  const std::vector<int64_t> sequence_buckets = buckets_up_to(limits.max_sequences);
  std::vector<std::string> token_specs;
  for (const auto& [spec, op] : g.gemm_ops) token_specs.push_back(op->spec().to_string());
  for (const auto* op : {g.norm.get(), g.norm_residual.get()}) token_specs.push_back(op->spec().to_string());
  token_specs.push_back(g.rope->spec().to_string());
  token_specs.push_back(g.prefill->spec().to_string());
  token_specs.push_back(g.embed->spec().to_string());
  token_specs.push_back(g.gather->spec().to_string());
  token_specs.push_back(g.argmax->spec().to_string());
  if (c.is_moe()) {
    token_specs.push_back(g.moe_route->spec().to_string());
    token_specs.push_back(g.moe_combine->spec().to_string());
    for (const auto& [spec, op] : g.moe_ops) token_specs.push_back(op->spec().to_string());
  }
  const int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  const auto kernels_start = std::chrono::steady_clock::now();
  models::LoadProgress bar(
      "preparing kernels",
      token_specs.size() * token_buckets.size() + sequence_buckets.size() +
          g.fused_ops.size() * (g.fused_max_tokens > 0 ? buckets_up_to(g.fused_max_tokens).size() : 0) +
          g.moe_decode_ops.size() * (g.moe_decode_max > 0 ? buckets_up_to(g.moe_decode_max).size() : 0),
      limits.progress, "kernels");
  auto tick = [&bar] { bar.advance(1); };
  session.prepare(token_specs, token_buckets, jobs, &g.kernels, tick);
  session.prepare({g.decode->spec().to_string()}, sequence_buckets, jobs, &g.kernels, tick);
  if (g.moe_decode_max > 0) {
    std::vector<std::string> decode_specs;
    for (const auto& [spec, op] : g.moe_decode_ops) decode_specs.push_back(spec);
    session.prepare(decode_specs, buckets_up_to(g.moe_decode_max), jobs, &g.kernels, tick);
  }
  if (g.fused_max_tokens > 0) {
    std::vector<std::string> fused_specs;
    for (const auto& [spec, op] : g.fused_ops) fused_specs.push_back(spec);
    session.prepare(fused_specs, buckets_up_to(g.fused_max_tokens), jobs, &g.kernels, tick);
  }
  bar.done();
  g.kernel_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - kernels_start).count();

  // The split workspaces: the largest any launch up to the limits takes.
  int64_t floats = 0, counters = 0, scratch = 0;
  for (int64_t m : token_buckets) {
    for (const auto& [spec, op] : g.gemm_ops) {
      const gemm::Config& config = op->config(m);
      floats = std::max(floats, gemm::workspace_floats(op->spec(), config, m));
      counters = std::max(counters, gemm::workspace_counters(op->spec(), config, m));
      scratch = std::max(scratch, gemm::scratch_bytes(op->spec(), config, m));
      gemm::ready_for_launch(config);  // cuBLAS's handle now, not inside a graph capture
    }
    floats = std::max(floats, attention::workspace_floats(g.prefill->spec(), g.prefill->config(m), m));
    counters = std::max(counters, attention::workspace_counters(g.prefill->spec(), g.prefill->config(m), m));
  }
  for (int64_t m : sequence_buckets) {
    floats = std::max(floats, attention::workspace_floats(g.decode->spec(), g.decode->config(m), m));
    counters = std::max(counters, attention::workspace_counters(g.decode->spec(), g.decode->config(m), m));
  }
  g.workspace.reserve(std::max<int64_t>(floats, 1), std::max<int64_t>(counters, 1));
  if (scratch > 0) g.gemm_scratch = DeviceBuffer(size_t(scratch));
  int64_t argmax_bytes = 16;
  for (int64_t m : token_buckets) argmax_bytes = std::max(argmax_bytes, g.argmax->workspace_bytes(m));
  g.argmax_workspace = DeviceBuffer(size_t(argmax_bytes));
  g.argmax_workspace.fill_bytes(0);
  if (c.is_moe()) {
    int64_t route_bytes = 16;
    for (int64_t m : token_buckets) route_bytes = std::max(route_bytes, g.moe_route->workspace_bytes(m));
    g.moe_route_workspace = DeviceBuffer(size_t(route_bytes));
    g.moe_route_workspace.fill_bytes(0);  // the route kernel leaves its counter at 0 (codegen/moe/op.h)
    int64_t decode_bytes = 16;
    for (const auto& [spec, op] : g.moe_decode_ops) {
      for (int64_t m : buckets_up_to(g.moe_decode_max)) {
        decode_bytes = std::max(decode_bytes, op->workspace_bytes(m));
      }
    }
    g.moe_decode_workspace = DeviceBuffer(size_t(decode_bytes));
    g.moe_decode_workspace.fill_bytes(0);  // likewise its counters
  }
  g.argmax_ids = DeviceBuffer(size_t(limits.max_tokens) * 4);

  // Activations and the step's batch.
  const std::array<int64_t, kActCount> width = act_widths(c);
  for (size_t a = 0; a < kActCount; ++a) g.acts[a] = DeviceBuffer(size_t(limits.max_tokens * width[a]) * 2);
  g.logit_inputs = DeviceBuffer(size_t(limits.max_tokens * c.hidden) * 2);
  g.logits = DeviceBuffer(size_t(limits.max_tokens * c.vocab) * 4);
  if (c.is_moe()) {
    const size_t pairs = size_t(limits.max_tokens * c.experts_per_token);
    g.moe_logits = DeviceBuffer(size_t(limits.max_tokens * c.experts) * 2);
    g.moe_ids = DeviceBuffer(pairs * 4), g.moe_weights = DeviceBuffer(pairs * 4), g.moe_sorted = DeviceBuffer(pairs * 4);
    g.moe_offsets = DeviceBuffer(size_t(c.experts + 1) * 4);
    g.moe_h = DeviceBuffer(pairs * size_t(c.moe_intermediate) * 2);
    g.moe_y = DeviceBuffer(pairs * size_t(c.hidden) * 4);
    if (c.has_shared_expert()) {
      g.moe_shared_h = DeviceBuffer(size_t(limits.max_tokens * c.shared_intermediate) * 2);
      g.moe_shared = DeviceBuffer(size_t(limits.max_tokens * c.hidden) * 2);
      g.moe_shared_logit = DeviceBuffer(size_t(limits.max_tokens) * 2 + 16);
    }
  }

  // The KV cache last, so a pool sized from memory gets what the rest left.
  if (fill_memory) {
    size_t free_now = 0;
    d.check(d.cuMemGetInfo(&free_now, &total_memory), "cuMemGetInfo", "sizing the KV cache");
    // Room for CUDA graphs (one per decode batch size), the step's batch arrays and the driver.
    constexpr size_t kReserve = size_t(512) << 20;
    g.limits.kv_pages = kv_pages_for_memory(total_memory, free_at_start, free_now, limits.memory_utilization,
                                            2 * page_bytes * size_t(c.layers) + limits.companion_page_bytes,
                                            kReserve + limits.companion_bytes);
  }
  // One page more than the pool: the scratch page a padded decode step's extra sequences write
  // (scratch_page()), never handed out.
  const size_t cache_bytes = size_t(g.limits.kv_pages + 1) * page_bytes;
  for (Impl::Layer& to : g.layers) {
    to.k_cache = DeviceBuffer(cache_bytes);
    to.v_cache = DeviceBuffer(cache_bytes);
    to.k_cache.fill_bytes(0);
    to.v_cache.fill_bytes(0);
    g.kv_bytes += 2 * cache_bytes;
  }
  const size_t tokens = size_t(limits.max_tokens) * 4, sequences = size_t(limits.max_sequences) * 4;
  size_t end = 0;
  auto slice = [&](Impl::Slice& to, size_t bytes) {
    to.g = &g, to.offset = end, to.bytes = bytes;
    end += (bytes + 255) / 256 * 256;  // each array 256-byte aligned, as its own allocation was
  };
  slice(g.ids, tokens), slice(g.positions, tokens), slice(g.slots, tokens), slice(g.logit_rows, tokens);
  slice(g.cu_q, sequences + 4), slice(g.seq_lens, sequences);
  slice(g.block_table, sequences * size_t(g.limits.row_pages()));
  g.batch_host = PinnedBuffer(end);
  g.batch_device = DeviceBuffer(end);
  g.batch_device.fill_bytes(0);
}

GpuBackend::~GpuBackend() {
  if (impl_ && impl_->stream) {
    const Driver& d = Driver::require_gpu();
    d.cuStreamSynchronize(impl_->stream);
    for (CUevent e : impl_->timing.starts) d.cuEventDestroy(e);
    for (CUevent e : impl_->timing.ends) d.cuEventDestroy(e);
    for (CUevent e : {impl_->step_start, impl_->step_end}) {
      if (e) d.cuEventDestroy(e);
    }
    impl_->drop_graphs();
    d.cuStreamDestroy(impl_->stream);
  }
}

void GpuBackend::run_graph(int key, const std::function<void()>& step) {
  Impl& g = *impl_;
  if (g.timing.on) throw Error("GPU backend: a profiled step runs op by op, not as a CUDA graph");
  const Driver& d = Driver::require_gpu();
  auto found = g.graphs.find(key);
  if (found == g.graphs.end()) {
    step();  // resolves every op's kernel for these counts: nothing may load during capture
    constexpr int kCaptureThreadLocal = 1;  // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    Impl::Graph graph;
    d.check(d.cuStreamBeginCapture(g.stream, kCaptureThreadLocal), "cuStreamBeginCapture", "a forward step");
    try {
      step();
    } catch (...) {
      CUgraph partial = nullptr;
      d.cuStreamEndCapture(g.stream, &partial);
      if (partial) d.cuGraphDestroy(partial);
      throw;
    }
    d.check(d.cuStreamEndCapture(g.stream, &graph.graph), "cuStreamEndCapture", "a forward step");
    d.check(d.cuGraphInstantiateWithFlags(&graph.exec, graph.graph, 0), "cuGraphInstantiateWithFlags",
            "a forward step");
    found = g.graphs.emplace(key, graph).first;
  }
  d.check(d.cuGraphLaunch(found->second.exec, g.stream), "cuGraphLaunch", "a forward step");
}

void GpuBackend::set_profiling(bool on) {
  impl_->timing.on = on;
  impl_->timing.used = 0;
}

GpuBackend::Profile GpuBackend::take_profile() {
  Impl::Timing& t = impl_->timing;
  Profile p;
  for (const auto& [key, o] : t.totals) p.ops.push_back(o);
  std::stable_sort(p.ops.begin(), p.ops.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  p.decode_steps = t.decode_steps, p.prefill_steps = t.prefill_steps;
  t.totals.clear(), t.decode_steps = 0, t.prefill_steps = 0;
  return p;
}

CUstream GpuBackend::stream() const { return impl_->stream; }
size_t GpuBackend::weight_bytes() const { return impl_->weight_bytes; }
size_t GpuBackend::kv_cache_bytes() const { return impl_->kv_bytes; }

int64_t GpuBackend::kv_pages() const { return impl_->limits.kv_pages; }
int32_t GpuBackend::scratch_page() const { return int32_t(impl_->limits.kv_pages); }
double GpuBackend::last_step_seconds() const { return impl_->last_step_seconds; }
const Session::PrepareStats& GpuBackend::kernels() const { return impl_->kernels; }
double GpuBackend::kernel_seconds() const { return impl_->kernel_seconds; }

void GpuBackend::read_first_rows(int64_t rows) {
  if (rows < 0 || rows > impl_->logit_count) throw Error("GPU backend: read_first_rows beyond the step's logit rows");
  impl_->read_rows = rows;
}

void GpuBackend::begin(const ForwardBatch& batch) {
  Impl& g = *impl_;
  if (batch.tokens() > g.limits.max_tokens || batch.sequences() > g.limits.max_sequences ||
      int64_t(batch.logit_rows.size()) > g.limits.max_tokens || batch.max_pages > g.limits.row_pages()) {
    throw Error("GPU backend: the batch is larger than the backend was sized for");
  }
  // One asynchronous copy of the staging buffer on the step's stream, ahead of its launches.
  // The staging buffer is free to refill: the previous step's read_logits/read_argmax waited
  // for that step, its copy included.
  auto put = [](std::span<const int32_t> from, const Impl::Slice& to) {
    if (!from.empty()) std::memcpy(to.host(), from.data(), from.size_bytes());
  };
  put(batch.token_ids, g.ids);
  put(batch.positions, g.positions);
  put(batch.slot_mapping, g.slots);
  put(batch.cu_q, g.cu_q);
  put(batch.seq_lens, g.seq_lens);
  put(batch.logit_rows, g.logit_rows);
  // Rows re-strided to the longest sequence's page count (row_pages, not the pool's: the copy
  // below is sequences × stride): a captured step's launches keep theirs.
  const size_t stride = size_t(g.limits.row_pages());
  auto* table = reinterpret_cast<int32_t*>(g.block_table.host());
  for (int b = 0; b < batch.sequences(); ++b) {
    const auto row = batch.block_table.subspan(size_t(b) * size_t(batch.max_pages), size_t(batch.max_pages));
    std::copy(row.begin(), row.end(), table + std::ptrdiff_t(size_t(b) * stride));
  }
  const size_t used =
      batch.sequences() > 0 ? g.block_table.offset + size_t(batch.sequences()) * stride * 4 : g.block_table.offset;
  const Driver& d = Driver::require_gpu();
  d.check(d.cuEventRecord(g.step_start, g.stream), "cuEventRecord", "the forward step");
  d.check(d.cuMemcpyHtoDAsync(g.batch_device.ptr(), g.batch_host.data(), used, g.stream), "cuMemcpyHtoDAsync",
          "copying a step's batch to the GPU");
  g.tokens = batch.tokens();
  g.sequences = batch.sequences();
  g.decode_sequences = batch.decode_sequences;
  g.logit_count = int64_t(batch.logit_rows.size());
  g.read_rows = g.logit_count;
  // Verify blocks in runs of one length while a verify kernel of that length exists (the
  // lengths rise: ForwardBatch::verify_sequences), the rest to the prefill kernel.
  const int verify_end = g.decode_sequences + batch.verify_sequences;
  auto q_len = [&](int b) { return batch.cu_q[size_t(b) + 1] - batch.cu_q[size_t(b)]; };
  g.verify_runs.clear();
  int b = g.decode_sequences;
  for (; b < verify_end && g.verify.count(q_len(b)); ++b) {
    if (g.verify_runs.empty() || g.verify_runs.back().q != q_len(b)) {
      g.verify_runs.push_back({b, 0, q_len(b), batch.cu_q[size_t(b)]});
    }
    ++g.verify_runs.back().count;
  }
  auto range = [&](int first, int end) {
    Impl::PrefillRange r{first, end, batch.cu_q[size_t(end)] - batch.cu_q[size_t(first)], 0};
    for (int i = first; i < end; ++i) r.max_q = std::max<int64_t>(r.max_q, q_len(i));
    return r;
  };
  g.verify_rest = range(b, verify_end);
  g.prefill_part = range(verify_end, g.sequences);
}

void GpuBackend::embedding(Act out) {
  Impl& g = *impl_;
  embedding::Args a;
  a.out = g.act(out), a.table = g.embed_table.ptr(), a.ids = g.ids.ptr(), a.tokens = g.tokens;
  Impl::Timed timed(g, "embedding");
  g.embed->launch(a, g.tokens, g.stream);
}

void GpuBackend::rmsnorm(Act out, Act x, std::optional<Act> residual, Norm weight) {
  Impl& g = *impl_;
  rmsnorm::Args a;
  a.out = g.act(out), a.x = g.act(x), a.residual = residual ? g.act(*residual) : 0;
  a.weight = g.norm_weight(weight);
  a.eps = float(g.config.rms_norm_eps), a.rows = g.tokens;
  Impl::Timed timed(g, residual ? "rmsnorm + residual" : "rmsnorm");
  (residual ? g.norm_residual : g.norm)->launch(a, g.tokens, g.stream);
}

void GpuBackend::gemm(Act out, Act in, Linear weight, Epilogue epilogue) {
  Impl& g = *impl_;
  Impl::Layer& l = g.layers[size_t(weight.layer)];
  DeviceLinear& w = weight.kind == Linear::kQkv      ? l.qkv
                    : weight.kind == Linear::kO      ? l.o
                    : weight.kind == Linear::kGateUp ? l.gate_up
                                                     : l.down;
  const bool accumulate = epilogue == Epilogue::kResidual;  // o and down into the residual stream
  if (accumulate ? weight.kind != Linear::kO && weight.kind != Linear::kDown : epilogue != w.epilogue)
    throw Error("GPU backend: a gemm's epilogue differs from the one its weight was prepared for");
  g.run_linear(w, g.act(out), g.act(in), g.tokens,
               weight.kind == Linear::kQkv      ? "gemm qkv"
               : weight.kind == Linear::kO      ? (accumulate ? "gemm o + residual" : "gemm o")
               : weight.kind == Linear::kGateUp ? "gemm gate_up"
                                                : (accumulate ? "gemm down + residual" : "gemm down"),
               accumulate);
}

bool GpuBackend::fuses_norms(const ForwardBatch& batch) const {
  const Impl& g = *impl_;
  return batch.decode_sequences == batch.sequences() && batch.tokens() <= g.fused_max_tokens;
}

void GpuBackend::gemm_normed(Act out, Act in, Norm norm, Linear weight, Epilogue epilogue) {
  Impl& g = *impl_;
  Impl::Layer& l = g.layers[size_t(weight.layer)];
  if (norm.kind == Norm::kFinal || (weight.kind != Linear::kQkv && weight.kind != Linear::kGateUp)) {
    throw Error("GPU backend: gemm_normed fuses the input norm into qkv and the post-attention norm into gate_up only");
  }
  DeviceLinear& w = weight.kind == Linear::kQkv ? l.qkv : l.gate_up;
  if (epilogue != w.epilogue)
    throw Error("GPU backend: a gemm's epilogue differs from the one its weight was prepared for");
  g.run_linear(w, g.act(out), g.act(in), g.tokens,
               weight.kind == Linear::kQkv ? "rmsnorm + gemm qkv" : "rmsnorm + gemm gate_up", true,
               g.norm_weight(norm));
}

void GpuBackend::rope_kv_write(int layer, Act qkv, Act q, Act, Act) {
  Impl& g = *impl_;
  Impl::Layer& l = g.layers[size_t(layer)];
  rope::Args a;
  a.qkv = g.act(qkv), a.positions = g.positions.ptr(), a.inv_freq = g.inv_freq.ptr();
  a.attention_factor = g.attention_factor, a.q_norm = l.q_norm.ptr(), a.k_norm = l.k_norm.ptr();
  a.eps = float(g.config.rms_norm_eps), a.q = g.act(q), a.k = l.k_cache.ptr(), a.v = l.v_cache.ptr();
  a.k_scale = l.k_scale(), a.v_scale = l.v_scale();
  a.slot_mapping = g.slots.ptr(), a.tokens = g.tokens;
  a.positions_from_host = true;  // begin() copies them from the host ahead of the step's kernels
  Impl::Timed timed(g, "rope + kv write");
  g.rope->launch(a, g.tokens, g.stream);
}

void GpuBackend::attention_decode(int layer, Act q, Act out) {
  Impl& g = *impl_;
  attention::Args a;
  a.out = g.act(out), a.q = g.act(q), a.batch = g.decode_sequences, a.max_q = 1;
  g.launch_attention(*g.decode, g.layers[size_t(layer)], 0, a, g.decode_sequences, "attention decode");
}

void GpuBackend::attention_verify(int layer, Act q, Act out) {
  Impl& g = *impl_;
  const Impl::Layer& l = g.layers[size_t(layer)];
  const CUdeviceptr row_bytes = CUdeviceptr(g.config.heads * g.config.head_dim * 2);
  for (const Impl::VerifyRun& run : g.verify_runs) {
    // The kernel finds block b's rows at b·q from q and out: both start at the run's first row.
    const CUdeviceptr row = CUdeviceptr(run.first_row);
    attention::Args a;
    a.out = g.act(out) + row * row_bytes, a.q = g.act(q) + row * row_bytes, a.batch = run.count, a.max_q = run.q;
    g.launch_attention(*g.verify.at(run.q), l, run.first, a, run.count, "attention verify");
  }
  if (g.verify_rest.end > g.verify_rest.first) prefill_range(layer, q, out, true);
}

void GpuBackend::attention_prefill(int layer, Act q, Act out) { prefill_range(layer, q, out, false); }

void GpuBackend::prefill_range(int layer, Act q, Act out, bool verify_rest) {
  Impl& g = *impl_;
  const Impl::PrefillRange& r = verify_rest ? g.verify_rest : g.prefill_part;
  attention::Args a;
  // q and out at the batch's start: cu_q holds each chunk's absolute first row.
  a.out = g.act(out), a.q = g.act(q), a.batch = r.end - r.first, a.max_q = r.max_q;
  g.launch_attention(*g.prefill, g.layers[size_t(layer)], r.first, a, r.tokens, "attention prefill");
}

void GpuBackend::moe(int layer, Act out, Act in) {
  Impl& g = *impl_;
  if (!g.config.is_moe()) throw Error("GPU backend: a MoE op on a dense model");
  Impl::Layer& l = g.layers[size_t(layer)];
  g.run_linear(l.router, g.moe_logits.ptr(), g.act(in), g.tokens, "moe router");
  moe::Args a;
  a.tokens = g.tokens;
  // Qwen2-MoE's shared expert, a dense MLP of every token, and its gate's logit: inputs of the
  // combine (in the one-launch layer too).
  auto shared_expert = [&] {
    if (!g.config.has_shared_expert()) return;
    g.run_linear(l.gate_up, g.moe_shared_h.ptr(), g.act(in), g.tokens, "moe shared gate_up");
    g.run_linear(l.down, g.moe_shared.ptr(), g.moe_shared_h.ptr(), g.tokens, "moe shared down");
    g.run_linear(l.shared_gate, g.moe_shared_logit.ptr(), g.act(in), g.tokens, "moe shared gate");
    a.shared = g.moe_shared.ptr(), a.shared_gate = g.moe_shared_logit.ptr();
  };
  if (l.moe_decode != nullptr && g.tokens <= g.moe_decode_max) {
    // A decode step: the shared expert first, then route, both projections and the combine in
    // one launch.
    shared_expert();
    a.logits = g.moe_logits.ptr(), a.x = g.act(in), a.h = g.moe_h.ptr(), a.y = g.moe_y.ptr(), a.out = g.act(out);
    a.workspace = g.moe_decode_workspace.ptr();
    a.experts = l.expert_gate_up[0].weights(), a.down = l.expert_down[0].weights();
    Impl::Timed timed(g, "moe decode layer");
    l.moe_decode->launch(a, g.tokens, g.stream);
    return;
  }
  a.logits = g.moe_logits.ptr(), a.ids = g.moe_ids.ptr(), a.weights = g.moe_weights.ptr();
  a.offsets = g.moe_offsets.ptr(), a.sorted = g.moe_sorted.ptr(), a.workspace = g.moe_route_workspace.ptr();
  a.x = g.act(in), a.h = g.moe_h.ptr(), a.y = g.moe_y.ptr(), a.out = g.act(out);
  {
    Impl::Timed timed(g, "moe route");
    g.moe_route->launch(a, g.tokens, g.stream);
  }
  // Every group's gate_up before any down: down reads h of every pair.
  for (const auto* groups : {&l.expert_gate_up, &l.expert_down}) {
    for (const ExpertGroup& grp : *groups) {
      a.experts = grp.weights(), a.slot = grp.has_slots ? grp.slot.ptr() : 0;
      Impl::Timed timed(g, groups == &l.expert_gate_up ? "moe gate_up" : "moe down");
      grp.op->launch(a, g.tokens, g.stream);
    }
  }
  shared_expert();
  Impl::Timed timed(g, "moe combine");
  g.moe_combine->launch(a, g.tokens, g.stream);
}

void GpuBackend::logits(Act in) {
  Impl& g = *impl_;
  embedding::Args rows;
  rows.out = g.logit_inputs.ptr(), rows.table = g.act(in), rows.ids = g.logit_rows.ptr(), rows.tokens = g.logit_count;
  {
    Impl::Timed timed(g, "lm_head row gather");
    g.gather->launch(rows, g.logit_count, g.stream);
  }
  g.run_linear(g.lm_head, g.logits.ptr(), g.logit_inputs.ptr(), g.logit_count, "gemm lm_head");
}

void GpuBackend::read_logits(std::span<float> out) {
  Impl& g = *impl_;
  const size_t count = size_t(g.read_rows * g.config.vocab);
  if (out.size() != count) throw Error("GPU backend: read_logits needs room for exactly rows × vocab floats");
  g.finish_step();
  g.logits.download(out.data(), count * 4);
}

void GpuBackend::read_logit_rows(std::span<const int32_t> rows, std::span<float> out) {
  Impl& g = *impl_;
  const size_t vocab = size_t(g.config.vocab);
  if (out.size() != rows.size() * vocab) throw Error("GPU backend: read_logit_rows needs room for rows × vocab floats");
  if (rows.empty()) return;
  for (const int32_t row : rows) {
    if (row < 0 || row >= g.read_rows) throw Error("GPU backend: read_logit_rows names a row the step lacks");
  }
  // Each row queued into page-locked memory behind the step's launches, then one sync: a
  // synchronous copy per row into pageable memory paid a sync and a staged copy per row.
  const Driver& d = Driver::require_gpu();
  const size_t row_bytes = vocab * 4;
  if (g.host_rows.bytes() < rows.size() * row_bytes) g.host_rows = PinnedBuffer(rows.size() * row_bytes);
  for (size_t i = 0; i < rows.size(); ++i) {
    d.check(d.cuMemcpyDtoHAsync(g.host_rows.data() + i * row_bytes,
                                g.logits.ptr() + CUdeviceptr(size_t(rows[i]) * row_bytes), row_bytes, g.stream),
            "cuMemcpyDtoHAsync", "reading logit rows");
  }
  d.check(d.cuStreamSynchronize(g.stream), "cuStreamSynchronize", "reading logit rows");
  std::memcpy(out.data(), g.host_rows.data(), rows.size() * row_bytes);
}

void GpuBackend::read_argmax(std::span<int32_t> out) {
  Impl& g = *impl_;
  if (int64_t(out.size()) != g.read_rows) throw Error("GPU backend: read_argmax needs room for exactly one id per row");
  if (g.read_rows > 0) {
    Impl::Timed timed(g, "argmax");
    g.argmax->launch({g.argmax_ids.ptr(), g.logits.ptr(), g.argmax_workspace.ptr(), g.read_rows}, g.read_rows,
                     g.stream);
  }
  g.finish_step();
  if (!out.empty()) g.argmax_ids.download(out.data(), out.size_bytes());
}

void GpuBackend::read_hidden(std::span<float> out) {
  Impl& g = *impl_;
  const size_t count = size_t(g.read_rows * g.config.hidden);
  if (out.size() != count) throw Error("GPU backend: read_hidden needs room for exactly rows × hidden floats");
  const Driver& d = Driver::require_gpu();
  d.check(d.cuStreamSynchronize(g.stream), "cuStreamSynchronize", "reading the hidden states");
  std::vector<uint16_t> rows(count);
  g.logit_inputs.download(rows.data(), count * 2);  // the lm_head's gathered fp16 inputs
  for (size_t i = 0; i < count; ++i) out[i] = cpu::half_to_float(rows[i]);
}

void GpuBackend::prepare_verify(int max_block) {
  Impl& g = *impl_;
  std::vector<std::string> specs;
  for (int q = 2; q <= std::min(max_block, attention::kMaxVerifyTokens); ++q) {
    if (g.verify.count(q)) continue;
    g.verify[q] = std::make_unique<AttentionOp>(g.session, "attention:op=verify," + g.attention_shape + ",q=" + s(q));
    specs.push_back(g.verify[q]->spec().to_string());
  }
  if (specs.empty()) return;
  const std::vector<int64_t> buckets = buckets_up_to(g.limits.max_sequences);
  models::LoadProgress bar("preparing verify kernels", specs.size() * buckets.size(), g.limits.progress, "kernels");
  g.session.prepare(specs, buckets, int(std::max(1u, std::thread::hardware_concurrency())), nullptr,
                    [&bar] { bar.advance(1); });
  bar.done();
  int64_t floats = 0, counters = 0;
  for (const auto& [q, op] : g.verify) {
    for (int64_t m : buckets) {
      floats = std::max(floats, attention::workspace_floats(op->spec(), op->config(m), m));
      counters = std::max(counters, attention::workspace_counters(op->spec(), op->config(m), m));
    }
  }
  if (!g.workspace.fits(floats, counters)) {
    g.drop_graphs();
    g.workspace.reserve(floats, counters);
  }
}

void GpuBackend::prepare_sampling() {
  Impl& g = *impl_;
  if (g.sample) return;
  const std::string spec = "sampling:op=sample,vocab=" + s(g.config.vocab);
  g.sample = std::make_unique<SampleOp>(g.session, spec + ",logprobs=0");
  g.sample_logprobs = std::make_unique<SampleOp>(g.session, spec + ",logprobs=" + s(cpu::kMaxLogprobs));
  g.session.prepare({g.sample->spec().to_string(), g.sample_logprobs->spec().to_string()},
                    buckets_up_to(g.limits.max_sequences), int(std::max(1u, std::thread::hardware_concurrency())));
  const size_t seqs = size_t(g.limits.max_sequences);
  g.sample_params = DeviceBuffer(seqs * sizeof(sampling::RowParams));
  g.sample_tokens = DeviceBuffer(seqs * 4);
  g.sample_logprob = DeviceBuffer(seqs * 4);
  g.sample_top_ids = DeviceBuffer(seqs * cpu::kMaxLogprobs * 4);
  g.sample_top_logprobs = DeviceBuffer(seqs * cpu::kMaxLogprobs * 4);
  g.history_offsets = DeviceBuffer((seqs + 1) * 4);
}

void GpuBackend::read_sampled(std::span<const SampleRequest> rows, std::span<cpu::SampledToken> out) {
  Impl& g = *impl_;
  if (!g.sample) throw Error("GPU backend: read_sampled before prepare_sampling");
  const int64_t n = int64_t(rows.size());
  if (n != g.read_rows || out.size() != rows.size())
    throw Error("GPU backend: read_sampled needs one request and one result per logit row");
  if (n > g.limits.max_sequences)
    throw Error("GPU backend: read_sampled takes at most max_sequences rows (" + std::to_string(n) + " logit rows)");
  if (n == 0) return;
  std::vector<sampling::RowParams> params;
  std::vector<int32_t> offsets{0}, history;
  bool penalties = false, logprobs = false;
  for (const SampleRequest& r : rows) {
    const cpu::SamplingParams& p = *r.params;
    params.push_back(cpu::row_params(p, r.step, int(r.prompt.size())));  // InputError for a logit_bias
    penalties = penalties || p.repetition_penalty != 1 || p.presence_penalty != 0 || p.frequency_penalty != 0;
    logprobs = logprobs || p.logprobs > 0;
  }
  if (penalties) {
    for (const SampleRequest& r : rows) {
      history.insert(history.end(), r.prompt.begin(), r.prompt.end());
      history.insert(history.end(), r.output.begin(), r.output.end());
      offsets.push_back(int32_t(history.size()));
    }
    const size_t entries = std::max<size_t>(history.size(), 1);
    if (g.history_ids.bytes() < entries * 4) g.history_ids = DeviceBuffer(entries * 4);
    const size_t table = size_t(sampling::history_table_bytes(int64_t(entries)));
    if (g.history_table.bytes() < table) g.history_table = DeviceBuffer(table);
    g.history_offsets.upload(offsets.data(), offsets.size() * 4);
    if (!history.empty()) g.history_ids.upload(history.data(), history.size() * 4);
  }
  g.sample_params.upload(params.data(), params.size() * sizeof(sampling::RowParams));
  SampleOp& op = logprobs ? *g.sample_logprobs : *g.sample;
  sampling::Args a;
  a.tokens = g.sample_tokens.ptr();
  a.token_logprobs = g.sample_logprob.ptr();
  a.top_ids = logprobs ? g.sample_top_ids.ptr() : 0;
  a.top_logprobs = logprobs ? g.sample_top_logprobs.ptr() : 0;
  a.logits = g.logits.ptr();
  a.params = g.sample_params.ptr();
  a.history_offsets = penalties ? g.history_offsets.ptr() : 0;
  a.history_ids = penalties ? g.history_ids.ptr() : 0;
  a.history_table = penalties ? g.history_table.ptr() : 0;
  a.rows = n;
  {
    Impl::Timed timed(g, "sample");
    op.launch(a, n, g.stream);
  }
  g.finish_step();
  std::vector<int32_t> tokens(static_cast<size_t>(n)), top_ids;
  std::vector<float> token_logprob(static_cast<size_t>(n)), top_logprobs;
  g.sample_tokens.download(tokens.data(), tokens.size() * 4);
  g.sample_logprob.download(token_logprob.data(), token_logprob.size() * 4);
  const size_t width = size_t(cpu::kMaxLogprobs);
  if (logprobs) {
    top_ids.resize(size_t(n) * width);
    top_logprobs.resize(size_t(n) * width);
    g.sample_top_ids.download(top_ids.data(), top_ids.size() * 4);
    g.sample_top_logprobs.download(top_logprobs.data(), top_logprobs.size() * 4);
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    cpu::SampledToken& t = out[r];
    t.token = tokens[r];
    // As cpu::sample: the chosen token's logprob only when asked for (or with top logprobs).
    t.logprob = rows[r].token_logprob || rows[r].params->logprobs > 0 ? token_logprob[r] : 0.f;
    t.top.clear();
    for (size_t i = 0; i < size_t(rows[r].params->logprobs) && i < width; ++i) {
      if (top_ids[r * width + i] < 0) break;
      t.top.emplace_back(top_ids[r * width + i], top_logprobs[r * width + i]);
    }
  }
}

}  // namespace onecat::model
