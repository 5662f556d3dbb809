// onecat throughput: the engine's offline benchmark (docs/engine.md). N requests of random
// prompt ids, or the requests of a JSONL file, queued all at once or in waves of B (a latency
// run; B = 1: one after another), run to completion through the engine; requests/s, output
// tokens/s, time to first token, time per output token and inter-token latency (percentiles
// over requests and tokens), with --json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "base/error.h"
#include "engine/engine.h"
#include "models/checkpoint/locate.h"
#include "models/config.h"
#include "models/model/generate.h"
#include "models/model/model.h"
#include "models/tokenizer/tokenizer.h"
#include "tools/onecat/commands.h"
#include "tools/onecat/profile_report.h"

namespace onecat::cli {
namespace {

struct Options {
  std::string model, device = "auto", dataset, kv_cache_dtype = "auto";
  int64_t num_prompts = 8, input_len = 128, output_len = 32, max_num_batched_tokens = 512, wave = 0;
  int max_num_seqs = 8;
  engine::EngineOptions spec;  // the speculative-decoding flags' fields
  uint64_t seed = 0;
  bool no_prefix_caching = false, json = false, device_sampling = true, profile = false;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = p / 100 * double(v.size() - 1);
  const size_t lo = size_t(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

nlohmann::json summary(const std::vector<double>& seconds) {
  const double mean =
      seconds.empty() ? 0.0 : std::accumulate(seconds.begin(), seconds.end(), 0.0) / double(seconds.size());
  return {{"mean_ms", 1e3 * mean},
          {"p50_ms", 1e3 * percentile(seconds, 50)},
          {"p90_ms", 1e3 * percentile(seconds, 90)},
          {"p99_ms", 1e3 * percentile(seconds, 99)}};
}

struct Work {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
};

// --dataset: one JSON object a line, {"prompt_ids": [ids]} or {"prompt": "text"} (the
// checkpoint's tokenizer.json encodes it), and "max_tokens" (default --output-len).
std::vector<Work> read_dataset(const Options& o, int64_t vocab) {
  std::ifstream in(o.dataset);
  if (!in) throw InputError("cannot read --dataset " + o.dataset + ".");
  std::optional<tokenizer::Tokenizer> tok;
  std::vector<Work> work;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = o.dataset + " line " + std::to_string(number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw InputError(where + " is not a JSON object.");
    }
    if (!j.is_object()) throw InputError(where + " is not a JSON object.");
    Work w;
    w.max_tokens = o.output_len;
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1) {
        throw InputError(where + ": max_tokens must be an integer of at least 1.");
      }
      w.max_tokens = j["max_tokens"].get<int64_t>();
    }
    if (j.contains("prompt_ids") == j.contains("prompt")) {
      throw InputError(where + " must have exactly one of \"prompt_ids\" (token ids) and \"prompt\" (text).");
    }
    if (j.contains("prompt_ids")) {
      const nlohmann::json& ids = j["prompt_ids"];
      if (!ids.is_array() || ids.empty()) throw InputError(where + ": prompt_ids must be a non-empty array of ids.");
      for (const nlohmann::json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
          throw InputError(where + ": prompt_ids holds " + id.dump() + ", not an id in [0, " + std::to_string(vocab) +
                           ").");
        }
        w.prompt.push_back(id.get<int32_t>());
      }
    } else {
      if (!j["prompt"].is_string()) throw InputError(where + ": prompt must be a string.");
      if (!tok) {
        if (!std::filesystem::exists(std::filesystem::path(o.model) / "tokenizer.json")) {
          throw InputError(where + " has a text prompt, but " + o.model + " has no tokenizer.json.");
        }
        tok = tokenizer::Tokenizer::from_hf_directory(o.model);
      }
      w.prompt = tok->encode(j["prompt"].get<std::string>());
      if (w.prompt.empty()) throw InputError(where + ": the prompt encodes to no tokens.");
    }
    work.push_back(std::move(w));
  }
  if (work.empty()) throw InputError("--dataset " + o.dataset + " holds no requests.");
  return work;
}

std::vector<double> ms(std::vector<double> seconds) {
  for (double& s : seconds) s *= 1e3;
  return seconds;
}

void run(const Options& o) {
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1) {
    throw InputError("--num-prompts, --input-len and --output-len must be at least 1.");
  }
  if (o.max_num_seqs < 1 || o.max_num_batched_tokens < 1) {
    throw InputError("--max-num-seqs and --max-num-batched-tokens must be at least 1.");
  }
  if (o.wave < 0) throw InputError("--wave must be 0 (every request at once) or a wave size of at least 1.");
  const model::Device device = resolve_device(o.device, "throughput");
  check_profile_device(o.profile, device);
  const int64_t vocab = models::load_model(o.model).vocab;

  std::vector<Work> work;
  if (!o.dataset.empty()) {
    work = read_dataset(o, vocab);
  } else {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      Work w{std::vector<int32_t>(size_t(o.input_len)), o.output_len};
      for (int32_t& t : w.prompt) t = id(rng);
      work.push_back(std::move(w));
    }
  }
  const int64_t requests = int64_t(work.size());
  const int64_t wave = o.wave == 0 ? requests : std::min(o.wave, requests);
  int64_t prompt_tokens = 0, pool_tokens = 0, wave_tokens = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    prompt_tokens += int64_t(work[i].prompt.size());
    wave_tokens += int64_t(work[i].prompt.size()) + work[i].max_tokens + 16;
    if ((int64_t(i) + 1) % wave == 0 || i + 1 == work.size()) {
      pool_tokens = std::max(pool_tokens, wave_tokens);
      wave_tokens = 0;
    }
  }

  model::ModelOptions mo;
  mo.device = device;
  mo.max_batch_tokens = o.max_num_batched_tokens;
  mo.max_sequences = o.max_num_seqs;
  // Every request of a wave at once: the pool never forces a preemption in this benchmark.
  mo.kv_cache_tokens = pool_tokens;
  mo.kv_cache_dtype = models::parse_kv_cache_dtype(o.kv_cache_dtype);
  mo.progress = !o.json;
  mo.profile = o.profile;
  const auto load_start = std::chrono::steady_clock::now();
  const std::unique_ptr<model::Model> m = model::Model::load(o.model, mo);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  engine::EngineOptions eo = o.spec;
  eo.prefix_caching = !o.no_prefix_caching;
  eo.device_sampling = o.device_sampling;
  engine::Engine e(*m, eo);
  std::map<int64_t, size_t> index;
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<double> queued(work.size(), 0), first(work.size(), -1), last(work.size(), 0);
  std::vector<int64_t> count(work.size(), 0);
  std::vector<double> step_seconds, itl, decode_step_seconds;
  int64_t decode_step_tokens = 0;
  double decode_gpu_seconds = 0;  // cuda: the decode-only steps' GPU time (event pairs)
  for (size_t next = 0; next < work.size() || !e.idle();) {
    if (e.idle()) {  // the next wave
      for (int64_t k = 0; k < wave && next < work.size(); ++k, ++next) {
        engine::Request r;
        r.prompt = work[next].prompt;
        r.max_tokens = work[next].max_tokens;
        r.sampling = model::GenerateOptions::greedy();  // no stop ids: every request runs its max_tokens
        queued[next] = since_start();
        index[e.add(std::move(r))] = next;
      }
    }
    const double step_start = since_start();
    const int64_t computed_before = e.stats().computed_tokens;
    const std::vector<engine::StepOutput> out = e.step();
    const double t = since_start();
    step_seconds.push_back(t - step_start);
    // A decode-only step: one token computed per output, each of a request already past its
    // first token (no prompt chunk, no drafts in it).
    bool decode_only = !out.empty() && e.stats().computed_tokens - computed_before == int64_t(out.size());
    for (const engine::StepOutput& s : out) decode_only = decode_only && first[index.at(s.id)] >= 0;
    if (decode_only) {
      decode_step_seconds.push_back(t - step_start);
      decode_step_tokens += int64_t(out.size());
      decode_gpu_seconds += m->last_step_gpu_seconds();
    }
    for (const engine::StepOutput& s : out) {
      const size_t i = index.at(s.id);
      if (first[i] < 0) {
        first[i] = t;
      } else {
        itl.push_back(t - last[i]);
      }
      last[i] = t;
      ++count[i];
    }
  }
  const double wall = since_start();
  std::vector<double> ttft, tpot;
  int64_t generated = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    ttft.push_back(first[i] - queued[i]);
    if (count[i] > 1) tpot.push_back((last[i] - first[i]) / double(count[i] - 1));
    generated += count[i];
  }
  const engine::EngineStats& st = e.stats();
  const double decode_seconds = std::accumulate(decode_step_seconds.begin(), decode_step_seconds.end(), 0.0);
  std::vector<double> acceptance_at;
  for (size_t i = 0; i < st.drafted_at.size(); ++i) {
    acceptance_at.push_back(st.drafted_at[i] ? double(st.accepted_at[i]) / double(st.drafted_at[i]) : 0.0);
  }
  nlohmann::json j{
      {"model", o.model},
      {"device", o.device},
      {"device_sampling", o.device_sampling},
      {"kv_cache_dtype", o.kv_cache_dtype},
      {"num_prompts", requests},
      {"dataset", o.dataset},
      {"wave", wave},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", generated},
      {"input_len", o.dataset.empty() ? o.input_len : 0},
      {"output_len", o.dataset.empty() ? o.output_len : 0},
      {"max_num_seqs", o.max_num_seqs},
      {"max_num_batched_tokens", o.max_num_batched_tokens},
      {"load_seconds", load_seconds},
      {"load", load_json(m->load_stats())},
      {"seconds", wall},
      {"requests_per_second", double(requests) / wall},
      {"output_tokens_per_second", double(generated) / wall},
      {"total_tokens_per_second", double(generated + prompt_tokens) / wall},
      {"ttft", summary(ttft)},
      {"ttft_ms_by_request", ms(ttft)},
      {"tpot", summary(tpot)},
      {"itl", summary(itl)},
      {"step", summary(step_seconds)},
      // The decode-only steps (every sequence one new token, no prompt chunk): what
      // llama-batched-bench's speed_tg times. TPOT also counts the steps a request
      // decoded in while others' prompts were prefilled.
      {"decode",
       {{"steps", decode_step_seconds.size()},
        {"tokens", decode_step_tokens},
        {"seconds", decode_seconds},
        {"tokens_per_second", decode_seconds > 0 ? double(decode_step_tokens) / decode_seconds : 0.0},
        {"step", summary(decode_step_seconds)},
        // cuda: the steps' GPU time, and the share of their wall time the host
        // spent outside it (scheduling, the batch's arrays, the reads).
        {"gpu_seconds", decode_gpu_seconds},
        {"host_share",
         device == model::Device::kCuda && decode_seconds > 0 ? 1.0 - decode_gpu_seconds / decode_seconds : 0.0}}},
      {"cuda_graphs", {{"sizes", e.graphs().sizes}, {"capture_seconds", e.graphs().seconds}}},
      {"warm_up", {{"steps", e.warm_up().steps}, {"seconds", e.warm_up().seconds}}},
      {"steps", st.steps},
      {"preemptions", st.preemptions},
      {"prefix_hit_tokens", st.prefix_hit_tokens},
      {"sampled_steps", st.sampled_steps},
      {"device_sampled_steps", st.device_sampled_steps},
      {"speculative",
       {{"drafter", o.spec.num_speculative_tokens ? o.spec.speculative : ""},
        {"num_draft_tokens", o.spec.num_speculative_tokens},
        {"ngram", {o.spec.ngram_min, o.spec.ngram_max}},
        {"draft_p_min", o.spec.draft_p_min},
        {"draft_tokens", st.draft_tokens},
        {"accepted_tokens", st.accepted_tokens},
        {"acceptance_rate", st.draft_tokens ? double(st.accepted_tokens) / double(st.draft_tokens) : 0.0},
        {"accepted_at", st.accepted_at},
        {"drafted_at", st.drafted_at},
        {"acceptance_rate_at", acceptance_at},
        // Tokens a request gains per verifying step: its accepted drafts and one more.
        {"mean_acceptance_length",
         st.draft_rounds ? double(st.accepted_tokens + st.draft_rounds) / double(st.draft_rounds) : 0.0},
        // Output tokens per engine step, all requests together.
        {"tokens_per_step", st.steps ? double(generated) / double(st.steps) : 0.0},
        // Target forwards a request took per output token: each step gave it one
        // token and its accepted drafts.
        {"target_steps_per_output_token",
         generated ? double(generated - st.accepted_tokens) / double(generated) : 0.0}}}};
  std::optional<model::GpuBackend::Profile> profile;
  if (o.profile) {
    profile = m->gpu()->take_profile();
    j["profile"] = profile_json(*profile, -1);
  }
  if (o.json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("%lld requests (%lld prompt tokens, %lld generated) in %.2f s: %.2f requests/s, %.1f output tokens/s\n",
              static_cast<long long>(requests), static_cast<long long>(prompt_tokens),
              static_cast<long long>(generated), wall, double(requests) / wall, double(generated) / wall);
  std::printf(
      "TTFT p50 %.1f ms, p99 %.1f ms; TPOT p50 %.2f ms, p99 %.2f ms; ITL p99 %.2f ms; %lld steps, %lld preemptions\n",
      j["ttft"]["p50_ms"].get<double>(), j["ttft"]["p99_ms"].get<double>(), j["tpot"]["p50_ms"].get<double>(),
      j["tpot"]["p99_ms"].get<double>(), j["itl"]["p99_ms"].get<double>(), static_cast<long long>(st.steps),
      static_cast<long long>(st.preemptions));
  if (o.spec.num_speculative_tokens > 0) {
    std::printf("speculative (%s, k = %d): %lld of %lld drafts accepted (%.1f%%), %.2f tokens per verifying step\n",
                o.spec.speculative.c_str(), o.spec.num_speculative_tokens, static_cast<long long>(st.accepted_tokens),
                static_cast<long long>(st.draft_tokens),
                st.draft_tokens ? 100.0 * double(st.accepted_tokens) / double(st.draft_tokens) : 0.0,
                j["speculative"]["mean_acceptance_length"].get<double>());
  }
  if (profile) print_profile(*profile, -1);
}

}  // namespace

void add_throughput(CLI::App& app) {
  auto* cmd = app.add_subcommand("throughput",
                                 "Engine benchmark: N requests (random or --dataset) through continuous batching");
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Hugging Face checkpoint directory")->required();
  add_device_option(cmd, o->device);
  cmd->add_option("--num-prompts", o->num_prompts, "Requests (default 8)");
  cmd->add_option("--input-len", o->input_len, "Prompt tokens per request (default 128)");
  cmd->add_option("--output-len", o->output_len, "New tokens per request (default 32)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per step (default 8)");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step (default 512)");
  cmd->add_option("--seed", o->seed, "Seed of the random prompts (default 0)");
  cmd->add_option("--dataset", o->dataset,
                  "JSONL requests instead of random ones: {\"prompt_ids\": [...]} or {\"prompt\": \"text\"}, "
                  "optional \"max_tokens\"");
  cmd->add_option("--wave", o->wave,
                  "Queue requests B at a time, the next B when these are done (a latency run; 1: one after "
                  "another; default 0: all at once)");
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Do not share cached prompt pages");
  add_kv_cache_dtype_option(cmd, o->kv_cache_dtype);
  add_device_sampling_option(cmd, o->device_sampling);
  add_speculative_options(cmd, o->spec, "0: off");
  cmd->add_flag("--profile", o->profile,
                "cuda: time every kernel (steps run op by op, no CUDA graphs) and report the decode steps' "
                "time by op");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    o->model = models::locate_checkpoint(o->model);  // a hub id: its cached snapshot
    run(*o);
  });
}

}  // namespace onecat::cli
