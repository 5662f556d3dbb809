// onecat serve: an OpenAI-compatible HTTP server on the engine (docs/serve.md). Handler
// threads (cpp-httplib's pool, one thread per open connection) parse and check a request,
// hand its choices to the EngineLoop's thread and turn the outputs into OpenAI's JSON or SSE.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "models/model/model.h"

namespace onecat::serve {

struct ServeOptions {
  std::string model_dir, host = "127.0.0.1";
  int port = 8000;                // 0: any free port (printed)
  std::string served_model_name;  // default: the model directory as given
  std::string api_key;            // non-empty: every endpoint but /health needs "Authorization: Bearer KEY"
  std::string reasoning_parser;   // "qwen3" or "deepseek_r1": chat replies' <think>…</think> → reasoning_content
  // A chat template (a file, or the template itself) used instead of the checkpoint's, for chat
  // with and without tools (vLLM's --chat-template); empty: the checkpoint's.
  std::string chat_template;
  std::string tool_call_parser = "hermes";  // the only tool-call format (vLLM's --tool-call-parser)
  // Requests' sampling defaults (vLLM's --generation-config): "auto" the checkpoint's
  // generation_config.json, "vllm" the API's own, or a directory with one; then
  // override_generation_config's JSON object over them (model::SamplingDefaults).
  std::string generation_config = "auto";
  std::string override_generation_config;
  model::Device device = model::Device::kCpu;
  // Per engine step; 0: the device's default, cuda 128 sequences and 2048 tokens (vLLM's step
  // budget for serving), cpu 8 and 512.
  int max_num_seqs = 0;
  int64_t max_num_batched_tokens = 0;
  int64_t max_model_len = 0;    // 0: config.json's max_position_embeddings (4096 when it has none)
  int64_t kv_cache_tokens = 0;  // 0: cpu max_num_seqs × max_model_len; cuda as gpu_memory_utilization leaves room for
  double gpu_memory_utilization = 0.9;  // cuda: the share of the GPU's memory onecat may hold
  std::string kv_cache_dtype = "auto";  // models::parse_kv_cache_dtype's names
  int64_t num_pages = 0;                // the pool in pages of 16 tokens instead of kv_cache_tokens (0: not given)
  // Speculative decoding (num_speculative_tokens: draft tokens per request and step, 0: off;
  // speculative, ngram_min/max, draft_p_min); the engine's other options are set from the above.
  engine::EngineOptions speculation;
  bool device_sampling = true;          // EngineOptions::device_sampling
  // vLLM's --quantization: checked against the method the checkpoint declares (onecat reads it
  // from there); empty: not given.
  std::string quantization;
  bool prefix_caching = true;           // EngineOptions::prefix_caching (vLLM's --[no-]enable-prefix-caching)
  bool cuda_graphs = true;              // ModelOptions::cuda_graphs (off: vLLM's --enforce-eager)
  // Requests without a seed draw from seeds made from this one in arrival order (vLLM's --seed);
  // none: from the system's entropy.
  std::optional<uint64_t> seed;
  size_t max_body_bytes = size_t(8) << 20;
  int threads = 64;  // connections served at once
};

// Loads the model and serves until SIGTERM or SIGINT; then stops accepting, lets in-flight
// requests finish and returns. InputError for bad options or a bad checkpoint; Error when the
// address cannot be bound.
void serve(const ServeOptions& options);

}  // namespace onecat::serve
