#include "models/model/forward.h"

namespace onecat::model {

void run_forward(Backend& b, const ForwardShape& shape, const ForwardBatch& batch) {
  b.begin(batch);
  run_layers(b, shape, batch);
}

void run_layers(Backend& b, const ForwardShape& shape, const ForwardBatch& batch) {
  const bool decodes = batch.decode_sequences > 0, verifies = batch.verify_sequences > 0;
  const bool prefills = batch.sequences() > batch.decode_sequences + batch.verify_sequences;
  // The embeddings start the residual stream; layer 0's norm has nothing to add to it yet.
  b.embedding(Act::kResidual);
  if (decodes && !verifies && !prefills && !shape.moe && !shape.o_bias && b.fuses_norms(batch)) {
    // A decode step: each norm inside the gemm that reads it, each residual add inside the gemm
    // that makes it (o_proj's and down's outputs join the residual stream in their epilogue).
    for (int l = 0; l < shape.layers; ++l) {
      b.gemm_normed(Act::kQkv, Act::kResidual, {Norm::kInput, l}, {Linear::kQkv, l},
                    shape.qkv_bias ? Epilogue::kBias : Epilogue::kNone);
      b.rope_kv_write(l, Act::kQkv, Act::kQ, Act::kK, Act::kV);
      b.attention_decode(l, Act::kQ, Act::kAttn);
      b.gemm(Act::kResidual, Act::kAttn, {Linear::kO, l}, Epilogue::kResidual);
      b.gemm_normed(Act::kMlp, Act::kResidual, {Norm::kPostAttention, l}, {Linear::kGateUp, l}, Epilogue::kSiluMul);
      b.gemm(Act::kResidual, Act::kMlp, {Linear::kDown, l}, Epilogue::kResidual);
    }
    b.rmsnorm(Act::kNormed, Act::kResidual, std::nullopt, {Norm::kFinal});
    b.logits(Act::kNormed);
    return;
  }
  for (int l = 0; l < shape.layers; ++l) {
    if (l == 0) {
      b.rmsnorm(Act::kNormed, Act::kResidual, std::nullopt, {Norm::kInput, l});
    } else {
      b.rmsnorm(Act::kNormed, Act::kHidden, Act::kResidual, {Norm::kInput, l});
    }
    b.gemm(Act::kQkv, Act::kNormed, {Linear::kQkv, l}, shape.qkv_bias ? Epilogue::kBias : Epilogue::kNone);
    // K/V written first: seq_lens count the new tokens, which attend to themselves.
    b.rope_kv_write(l, Act::kQkv, Act::kQ, Act::kK, Act::kV);
    if (decodes) b.attention_decode(l, Act::kQ, Act::kAttn);
    if (verifies) b.attention_verify(l, Act::kQ, Act::kAttn);
    if (prefills) b.attention_prefill(l, Act::kQ, Act::kAttn);
    b.gemm(Act::kHidden, Act::kAttn, {Linear::kO, l}, shape.o_bias ? Epilogue::kBias : Epilogue::kNone);
    b.rmsnorm(Act::kNormed, Act::kHidden, Act::kResidual, {Norm::kPostAttention, l});
    if (shape.moe) {
      b.moe(l, Act::kHidden, Act::kNormed);
      continue;
    }
    b.gemm(Act::kMlp, Act::kNormed, {Linear::kGateUp, l}, Epilogue::kSiluMul);
    b.gemm(Act::kHidden, Act::kMlp, {Linear::kDown, l}, Epilogue::kNone);
  }
  b.rmsnorm(Act::kNormed, Act::kHidden, Act::kResidual, {Norm::kFinal});
  b.logits(Act::kNormed);
}

}  // namespace onecat::model
