// The forward pass's ops on a GPU: the checkpoint's packed weights uploaded once, every
// op a PreparedOp of its family (gemm, rmsnorm, rope with K/V written straight into the paged
// cache, attention, embedding, moe; the lm_head's rows gathered by the embedding kernel), every
// kernel of every M bucket up to the limits compiled (or read from the cache) and every buffer
// allocated at construction. A step is then launches on one stream with no allocation, no
// compile and no text, so it can be captured in a CUDA graph.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/checkpoint/loaded_model.h"
#include "models/model/backend.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/session.h"

namespace onecat::model {

class GpuBackend final : public Backend {
 public:
  // Needs the Session's GPU in use (Session::use_gpu). Error when the model does not fit in
  // the GPU's memory (the driver's sentence names the allocation).
  GpuBackend(Session& session, const models::LoadedModel& model, const BackendLimits& limits);
  ~GpuBackend() override;

  void begin(const ForwardBatch& batch) override;
  void embedding(Act out) override;
  void rmsnorm(Act out, Act x, std::optional<Act> residual, Norm weight) override;
  void gemm(Act out, Act in, Linear weight, Epilogue epilogue) override;
  // Decode steps of up to gemv_default_max_m tokens (dense models without an o_proj bias), where
  // models::kGpuFusesNorms: the fused step passes its GPU checks (GemmGpu.NormFused*,
  // Tiny/GpuForward.*, GpuProfile.* with it set) but measured slower than the norms apart, so it
  // is off.
  bool fuses_norms(const ForwardBatch& batch) const override;
  void gemm_normed(Act out, Act in, Norm norm, Linear weight, Epilogue epilogue) override;
  void rope_kv_write(int layer, Act qkv, Act q, Act k, Act v) override;
  void attention_decode(int layer, Act q, Act out) override;
  // Each run of verify blocks of one length through the verify kernel of that length
  // (prepare_verify); blocks longer than those it prepared through the prefill kernel.
  void attention_verify(int layer, Act q, Act out) override;
  void attention_prefill(int layer, Act q, Act out) override;
  // The router gemm, then the moe family: route, each weight format's experts' gate_up, then
  // down, and the slot-ordered combine.
  void moe(int layer, Act out, Act in) override;
  void logits(Act in) override;
  void read_logits(std::span<float> out) override;
  void read_logit_rows(std::span<const int32_t> rows, std::span<float> out) override;
  void read_argmax(std::span<int32_t> out) override;
  void read_hidden(std::span<float> out) override;
  void prepare_sampling() override;
  void read_sampled(std::span<const SampleRequest> rows, std::span<cpu::SampledToken> out) override;

  // Runs `step` (the ops of one forward step after begin()) as a CUDA graph keyed by `key`
  // (e.g. the decode batch size: every count a launch bakes in is the same for one key). The
  // first time, `step` runs eagerly once, so every op's kernel for these counts is resolved,
  // and is then captured; later calls replay the graph. The block table's stride is always
  // BackendLimits::row_pages, so it is the same in every step.
  void run_graph(int key, const std::function<void()>& step);

  // Kernel times by op (docs/models.md, "Profiling"): while on, every launch is bracketed by
  // events and timed when the step's logits are read; steps must then run op by op (a captured
  // graph would hold the events). take_profile returns the sums since the last call and resets.
  struct OpTime {
    std::string op;       // "gemm gate_up", "attention decode", ...
    bool decode = false;  // from decode-only steps (else steps with a prefill chunk)
    int64_t launches = 0;
    double ms = 0;  // the launches' GPU time, summed
  };
  struct Profile {
    std::vector<OpTime> ops;
    int64_t decode_steps = 0, prefill_steps = 0;
  };
  void set_profiling(bool on);
  Profile take_profile();

  CUstream stream() const;
  // Device bytes of the weights, and of the KV cache.
  size_t weight_bytes() const;
  size_t kv_cache_bytes() const;
  // The KV cache's pages: the limits', or those sized from memory (limits.kv_pages 0).
  int64_t kv_pages() const;
  // A page past the pool's, never handed out: a padded decode step's extra sequences write their
  // K and V there (pad_uniform_batch).
  int32_t scratch_page() const;
  // After begin(): the reads (read_logits, read_argmax, read_sampled) return the step's first
  // `rows` logit rows, a padded step's real ones.
  void read_first_rows(int64_t rows);
  // The last step's GPU time, begin()'s copy to its read's last launch (an event pair): the
  // step's wall time less this is the host's share.
  double last_step_seconds() const;
  // The kernels the constructor prepared (every op's, every bucket up to the limits: tuned or
  // default, from the cache or compiled) and the seconds that took.
  const Session::PrepareStats& kernels() const;
  double kernel_seconds() const;

  // Readies the verify kernels of blocks of 2 to max_block tokens (at most the attention
  // family's 16), every sequence bucket's, and their split workspace, so that no step compiles;
  // an engine that speculates calls it once. Graphs captured before it are dropped if the
  // workspace had to grow (they hold its old address) and captured again when next run.
  void prepare_verify(int max_block);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  // The prefill kernel over the step's verify blocks it takes (verify_rest) or its prefill chunks.
  void prefill_range(int layer, Act q, Act out, bool verify_rest);
};

}  // namespace onecat::model
