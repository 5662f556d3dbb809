// The forward pass's ops on the CPU (runtime/cpu): weights dequantised once to fp32 at
// construction, fp32 accumulation in the gemms, the references' rmsnorm, RoPE, embedding and
// paged attention, activations rounded to fp16 between ops exactly where a GPU step rounds
// them. Slow but exact; the oracle the GPU backend is checked against, and what runs
// everything above the model without a GPU.
#pragma once
#include <memory>
#include <vector>

#include "models/checkpoint/loaded_model.h"
#include "models/model/backend.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/rope.h"

namespace onecat::model {

class CpuBackend final : public Backend {
 public:
  // Copies what it needs of `model` (the dequantised weights, its config); `model` may go.
  CpuBackend(const models::LoadedModel& model, const BackendLimits& limits);
  ~CpuBackend() override;

  void begin(const ForwardBatch& batch) override;
  void embedding(Act out) override;
  void rmsnorm(Act out, Act x, std::optional<Act> residual, Norm weight) override;
  void gemm(Act out, Act in, Linear weight, Epilogue epilogue) override;
  // Decode steps of up to models::kFusedNormMaxTokens tokens take the fused forward too (so it is tested
  // without a GPU); gemm_normed is rmsnorm into kNormed then gemm, and the residual epilogue
  // rounds as rmsnorm's residual add does, so both forwards give the same bits.
  bool fuses_norms(const ForwardBatch& batch) const override;
  void gemm_normed(Act out, Act in, Norm norm, Linear weight, Epilogue epilogue) override;
  void rope_kv_write(int layer, Act qkv, Act q, Act k, Act v) override;
  void attention_decode(int layer, Act q, Act out) override;
  void attention_verify(int layer, Act q, Act out) override;
  void read_hidden(std::span<float> out) override;
  void attention_prefill(int layer, Act q, Act out) override;
  void moe(int layer, Act out, Act in) override;
  void logits(Act in) override;
  void read_logits(std::span<float> out) override;
  void read_logit_rows(std::span<const int32_t> rows, std::span<float> out) override;
  void read_argmax(std::span<int32_t> out) override;
  void read_sampled(std::span<const SampleRequest> rows, std::span<cpu::SampledToken> out) override;

 private:
  struct Weights;
  struct Buffers;
  void attention(int layer, Act q, Act out, int first_sequence, int sequences);
  // The layer's KV cache as cpu::attention and kv_write take it: BackendLimits::kv_dtype's
  // elements, fp8 with the layer's scales.
  cpu::PagedKv paged_kv(int layer);

  models::ModelConfig config_;
  BackendLimits limits_;
  std::unique_ptr<Weights> weights_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace onecat::model
