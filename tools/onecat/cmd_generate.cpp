// onecat generate: one sequence through a checkpoint on the CPU or GPU backend: the prompt as
// ids or text, greedy or sampled, until EOS or --max-tokens.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "models/checkpoint/locate.h"
#include "models/config.h"
#include "models/model/generate.h"
#include "models/model/generation_config.h"
#include "models/model/gpu_backend.h"
#include "models/model/model.h"
#include "models/tokenizer/decode_stream.h"
#include "models/tokenizer/tokenizer.h"
#include "tools/onecat/commands.h"
#include "tools/onecat/profile_report.h"

namespace onecat::cli {
namespace {

struct Options {
  std::string model, prompt_ids, prompt, device = "auto", kv_cache_dtype = "auto";
  int64_t max_tokens = 64, prefill_chunk = 256;
  cpu::SamplingParams sampling = model::GenerateOptions::greedy();
  bool ignore_eos = false, json = false, no_cuda_graphs = false, no_fused_norms = false, profile = false;
};

// --profile's decode step as measured here (the difference from the kernels' sum is launch and
// host time: what CUDA graphs and the engine remove).
double decode_step_us(const model::GenerateResult& r) {
  return r.decode_steps ? r.decode_seconds * 1e6 / double(r.decode_steps) : 0.0;
}

void run(const Options& o, bool ids_given, bool text_given) {
  if (ids_given == text_given) throw InputError("generate needs exactly one of --prompt-ids and --prompt.");
  cpu::validate(o.sampling);
  if (o.max_tokens < 1) throw InputError("--max-tokens must be at least 1.");
  const model::Device device = resolve_device(o.device, "generate");
  check_profile_device(o.profile, device);
  // Checked against config.json before gigabytes of weights are read (and before the tokenizer,
  // so that a wrong path is named as one).
  const int64_t vocab = models::load_model(o.model).vocab;
  std::optional<tokenizer::Tokenizer> tok;
  if (std::filesystem::exists(std::filesystem::path(o.model) / "tokenizer.json")) {
    tok = tokenizer::Tokenizer::from_hf_directory(o.model);
  } else if (text_given) {
    throw InputError("--prompt needs the checkpoint's tokenizer.json, which " + o.model + " lacks; pass --prompt-ids.");
  }
  const std::vector<int32_t> prompt = ids_given ? parse_ids(o.prompt_ids, "--prompt-ids") : tok->encode(o.prompt);
  if (prompt.empty()) throw InputError("the prompt has no tokens.");
  for (int32_t id : prompt) {
    if (id >= vocab) {
      throw InputError("prompt token id " + std::to_string(id) + " is outside the model's vocabulary (0 to " +
                       std::to_string(vocab - 1) + ").");
    }
  }

  model::ModelOptions mo;
  mo.device = device;
  mo.max_batch_tokens = o.prefill_chunk;
  mo.max_sequences = 1;
  mo.kv_cache_tokens = int64_t(prompt.size()) + o.max_tokens;
  mo.kv_cache_dtype = models::parse_kv_cache_dtype(o.kv_cache_dtype);
  mo.progress = !o.json;
  mo.cuda_graphs = !o.no_cuda_graphs;
  mo.fused_norms = !o.no_fused_norms;
  mo.profile = o.profile;
  const std::unique_ptr<model::Model> m = model::Model::load(o.model, mo);
  // The prefill's step sizes launched once before it is timed (first launches: Model::warm_up).
  m->warm_up(std::min<int64_t>(o.prefill_chunk, int64_t(prompt.size())));

  model::GenerateOptions go;
  go.max_tokens = o.max_tokens;
  go.sampling = o.sampling;
  if (!o.ignore_eos) {
    go.stop_ids = model::eos_token_ids(o.model);
    if (tok) {
      for (int32_t id : tok->eos_token_ids()) {
        if (std::find(go.stop_ids.begin(), go.stop_ids.end(), id) == go.stop_ids.end()) go.stop_ids.push_back(id);
      }
    }
  }
  std::optional<tokenizer::DecodeStream> stream;
  if (tok) stream.emplace(*tok);
  std::string text;
  const model::GenerateResult r = model::generate(*m, prompt, go, [&](int32_t id) {
    if (!stream) {
      if (!o.json) std::cout << id << " " << std::flush;
      return;
    }
    // An id the tokenizer lacks (a model's vocabulary is often padded past the tokenizer's)
    // decodes to nothing, as in Hugging Face tokenizers.
    if (!tok->id_to_token(id)) return;
    const std::string piece = stream->step(id);
    text += piece;
    if (!o.json) std::cout << piece << std::flush;
  });
  if (stream) {
    const std::string rest = stream->finish();
    text += rest;
    if (!o.json) std::cout << rest;
  }
  if (o.json) {
    nlohmann::json j{{"prompt_ids", prompt},
                     {"ids", r.tokens},
                     {"finish_reason", r.finish_reason},
                     {"prefill_seconds", r.prefill_seconds},
                     {"decode_seconds", r.decode_seconds},
                     {"decode_tokens_per_second", r.decode_tokens_per_second()}};
    if (tok) j["text"] = text;
    j["load"] = load_json(m->load_stats());
    if (o.profile) j["profile"] = profile_json(m->gpu()->take_profile(), decode_step_us(r));
    std::cout << j.dump() << "\n";
  } else {
    std::cout << std::endl;  // before the summary on stderr, also where stdout is a pipe
  }
  if (o.profile && !o.json) print_profile(m->gpu()->take_profile(), decode_step_us(r));
  std::fprintf(
      stderr,
      "onecat: %zu prompt tokens prefilled in %.3f s (%.1f tokens/s); %zu new tokens, %.1f tokens/s decoding; %s\n",
      prompt.size(), r.prefill_seconds, r.prefill_seconds > 0 ? double(prompt.size()) / r.prefill_seconds : 0.0,
      r.tokens.size(), r.decode_tokens_per_second(),
      r.finish_reason == "stop" ? "stopped at an end-of-sequence token" : "reached --max-tokens");
}

}  // namespace

void add_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate tokens from a checkpoint (one sequence, on the CPU or a GPU)");
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Hugging Face checkpoint directory")->required();
  auto* ids = cmd->add_option("--prompt-ids", o->prompt_ids, "The prompt as comma-separated token ids");
  auto* text = cmd->add_option("--prompt", o->prompt, "The prompt as text (needs the checkpoint's tokenizer.json)");
  cmd->add_option("--max-tokens", o->max_tokens, "New tokens at most (default 64)");
  add_device_option(cmd, o->device);
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens per forward step (default 256)");
  add_kv_cache_dtype_option(cmd, o->kv_cache_dtype);
  cmd->add_option("--temperature", o->sampling.temperature, "0 (default): greedy");
  cmd->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens (0: off)");
  cmd->add_option("--top-p", o->sampling.top_p, "Keep the smallest set of tokens with this much probability (1: off)");
  cmd->add_option("--min-p", o->sampling.min_p, "Drop tokens below min_p × the top probability (0: off)");
  cmd->add_option("--repetition-penalty", o->sampling.repetition_penalty, "1: off");
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "0: off");
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "0: off");
  cmd->add_option("--seed", o->sampling.seed, "Seed of the sampler (default 0)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs, "cuda: launch every decode step op by op (no CUDA graphs)");
  cmd->add_flag("--no-fused-norms", o->no_fused_norms,
                "Decode steps run each RMSNorm as its own op instead of inside the gemm after it (for comparison)");
  cmd->add_flag("--profile", o->profile,
                "cuda: time every kernel and print the time per decode step by op (steps run op by op)");
  cmd->add_flag("--json", o->json, "Print one JSON object: prompt_ids, ids, text, finish_reason, timings");
  cmd->callback([o, ids, text] {
    o->model = models::locate_checkpoint(o->model);  // a hub id: its cached snapshot
    run(*o, ids->count() > 0, text->count() > 0);
  });
}

}  // namespace onecat::cli
