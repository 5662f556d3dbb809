// The forward pass of the decoder architectures (Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE), written
// once over a Backend (docs/models.md, "The forward pass"). vLLM's order: the residual stream
// in fp16, every norm after the first fused with the residual add, q|k|v one gemm (+bias),
// q/k norm, RoPE and the K/V cache write one op (before attention), gate|up one gemm with the silu·mul
// epilogue, lm_head only over the rows whose logits are wanted.
#pragma once
#include "models/model/backend.h"

namespace onecat::model {

// What the layer loop needs to know of the model beyond the backend's weights.
struct ForwardShape {
  int layers = 0;
  bool qkv_bias = false;  // Qwen2; Llama with attention_bias
  bool o_bias = false;    // Llama with attention_bias
  bool moe = false;       // Qwen3-MoE: every layer's MLP is Backend::moe
};

// Runs every layer of `batch` on `backend` and leaves the logits of batch.logit_rows in its
// logits buffer. The batch must have passed check_batch.
void run_forward(Backend& backend, const ForwardShape& shape, const ForwardBatch& batch);
// run_forward after its backend.begin(batch): the ops alone (what a CUDA graph captures).
void run_layers(Backend& backend, const ForwardShape& shape, const ForwardBatch& batch);

}  // namespace onecat::model
