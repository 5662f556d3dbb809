// onecat serve: the OpenAI-compatible HTTP server (serve/, docs/serve.md) on one checkpoint.
#include <memory>

#include "base/error.h"
#include "models/checkpoint/locate.h"
#include "tools/onecat/commands.h"
#ifdef ONECAT_HAVE_SERVE
#include "serve/server.h"
#endif

namespace onecat::cli {

#ifdef ONECAT_HAVE_SERVE
void add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat) on a checkpoint");
  auto o = std::make_shared<serve::ServeOptions>();
  auto device = std::make_shared<std::string>("auto");
  cmd->add_option("--model", o->model_dir, "Hugging Face checkpoint directory (with tokenizer.json)")->required();
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (default 8000; 0: any free port, printed)");
  cmd->add_option("--served-model-name", o->served_model_name, "The model's name in the API (default: --model)");
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on every endpoint but /health");
  cmd->add_option("--generation-config", o->generation_config,
                  "Requests' default temperature, top_k, top_p, min_p, repetition_penalty and max_tokens: auto (the "
                  "checkpoint's generation_config.json, the default), vllm (the API's own) or a directory with a "
                  "generation_config.json");
  cmd->add_option("--override-generation-config", o->override_generation_config,
                  "A JSON object of those defaults over --generation-config's, e.g. '{\"temperature\": 0.5}' "
                  "(max_new_tokens for max_tokens)");
  add_device_option(cmd, *device);
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
  cmd->add_option(
      "--chat-template", o->chat_template,
      "A chat template (a file, or the template itself) instead of the checkpoint's, with and without tools");
  // vLLM's flags, so its command lines run unchanged: what they ask for is what onecat does.
  cmd->add_option("--tool-call-parser", o->tool_call_parser,
                  "How replies write tool calls: hermes (the default: Hermes/Qwen <tool_call> JSON blocks) or "
                  "llama3_json (Llama 3.1–3.3: the reply is {\"name\": …, \"parameters\": …} objects) or mistral "
                  "([TOOL_CALLS] and a JSON array of calls)");
  auto accepted = std::make_shared<bool>(false);
  cmd->add_flag("--enable-auto-tool-choice", *accepted,
                "Accepted for vLLM's command lines: tool_choice auto is always on");
  cmd->add_flag("--trust-remote-code", *accepted,
                "Accepted for vLLM's command lines: onecat runs no code from a checkpoint");
  cmd->add_flag("--disable-log-requests,--disable-log-stats", *accepted,
                "Accepted for vLLM's command lines: onecat logs neither requests nor periodic stats (see /metrics)");
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o->prefix_caching,
                "Reuse the KV pages of a prompt prefix seen before (the default; --no-enable-prefix-caching: off)");
  cmd->add_flag("!--enforce-eager", o->cuda_graphs, "cuda: run decode steps op by op, without CUDA graphs");
  auto seed = std::make_shared<int64_t>(-1);
  cmd->add_option("--seed", *seed,
                  "Requests without a seed draw from seeds made from this one in arrival order, so a restarted "
                  "server replays them (default: a random base)");
  cmd->add_option("--quantization,-q", o->quantization,
                  "vLLM's: the checkpoint's own method (awq, gptq, fp8, modelopt_fp4, mxfp4 or none), checked "
                  "against what it declares (default: whatever it declares)");
  auto block = std::make_shared<int>(16);
  cmd->add_option("--block-size", *block, "16 (the KV cache's page: 16 tokens)");
  auto dtype = std::make_shared<std::string>("auto");
  cmd->add_option("--dtype", *dtype, "auto, half or float16 (the only compute type: bf16 checkpoints load as fp16)");
  auto tp = std::make_shared<int>(1);
  cmd->add_option("--tensor-parallel-size", *tp, "1 (one GPU per server)");
  cmd->callback([o, device, dtype, tp, accepted, seed, block] {
    if (*block != 16) throw InputError("--block-size must be 16: onecat's KV cache pages hold 16 tokens.");
    if (*seed < -1) throw InputError("--seed must be a non-negative integer.");
    if (*seed >= 0) o->seed = uint64_t(*seed);
    if (*dtype != "auto" && *dtype != "half" && *dtype != "float16") {
      throw InputError(
          "--dtype must be auto, half or float16: onecat computes in fp16 (Volta has no bf16; bf16 "
          "checkpoints are converted at load), not " +
          quoted_input(*dtype) + ".");
    }
    if (*tp != 1) throw InputError("--tensor-parallel-size must be 1: a server runs on one GPU.");
    o->device = resolve_device(*device, "serve");
    // A hub id serves under that name (vLLM's way), from its cached snapshot.
    if (o->served_model_name.empty()) o->served_model_name = o->model_dir;
    o->model_dir = models::locate_checkpoint(o->model_dir);
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
