// onecat serve: the OpenAI-compatible HTTP server (serve/, docs/serve.md) on one checkpoint.
#include <memory>

#include "base/error.h"
#include "tools/onecat/commands.h"
#ifdef ONECAT_HAVE_SERVE
#include "serve/server.h"
#endif

namespace onecat::cli {

#ifdef ONECAT_HAVE_SERVE
void add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat) on a checkpoint");
  auto o = std::make_shared<serve::ServeOptions>();
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("--model", o->model_dir, "Hugging Face checkpoint directory (with tokenizer.json)")->required();
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (default 8000; 0: any free port, printed)");
  cmd->add_option("--served-model-name", o->served_model_name, "The model's name in the API (default: --model)");
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on every endpoint but /health");
  cmd->add_option("--device", *device, "cpu (default) or cuda");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per engine step (default: cuda 128, cpu 8)");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens,
                  "Tokens per engine step (default: cuda 2048, cpu 512)");
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Prompt + output tokens of a request, at most (default: config.json's max_position_embeddings)");
  cmd->add_option("--kv-cache-tokens", o->kv_cache_tokens,
                  "KV cache size in tokens (default: cuda, what --gpu-memory-utilization leaves; cpu, seqs × "
                  "max-model-len)");
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization,
                  "cuda: the share of the GPU's memory onecat may hold, the KV cache taking what the weights leave "
                  "(default 0.9)");
  cmd->add_option("--num-pages", o->num_pages, "KV cache size in pages of 16 tokens (instead of --kv-cache-tokens)");
  add_kv_cache_dtype_option(cmd, o->kv_cache_dtype);
  add_speculative_options(cmd, o->speculation, "0: off");
  add_device_sampling_option(cmd, o->device_sampling);
  cmd->add_option("--reasoning-parser", o->reasoning_parser,
                  "qwen3 or deepseek_r1: a chat reply's leading <think>…</think> becomes reasoning_content");
  cmd->callback([o, device] {
    o->device = model::parse_device(*device);
    serve::serve(*o);
  });
}
#else
void add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (not in this build)");
  cmd->allow_extras();
  cmd->callback([] {
    throw InputError(
        "this onecat was built without cpp-httplib; install libcpp-httplib-dev (scripts/setup) and rebuild.");
  });
}
#endif

}  // namespace onecat::cli
