// onecat throughput: the engine's offline benchmark (docs/engine.md). N requests of random
// prompt ids, all queued at once, run to completion through the engine; requests/s, output
// tokens/s, time to first token and time per output token (percentiles), with --json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "base/error.h"
#include "engine/engine.h"
#include "models/config.h"
#include "models/model/generate.h"
#include "models/model/model.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

struct Options {
  std::string model, device = "cpu";
  int64_t num_prompts = 8, input_len = 128, output_len = 32, max_num_batched_tokens = 512;
  int max_num_seqs = 8;
  uint64_t seed = 0;
  bool no_prefix_caching = false, json = false;
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

void run(const Options& o) {
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1) {
    throw InputError("--num-prompts, --input-len and --output-len must be at least 1.");
  }
  if (o.max_num_seqs < 1 || o.max_num_batched_tokens < 1) {
    throw InputError("--max-num-seqs and --max-num-batched-tokens must be at least 1.");
  }
  const model::Device device = model::parse_device(o.device);
  const int64_t vocab = models::load_model(o.model).vocab;

  model::ModelOptions mo;
  mo.device = device;
  mo.max_batch_tokens = o.max_num_batched_tokens;
  mo.max_sequences = o.max_num_seqs;
  // Every request's tokens at once: the pool never forces a preemption in this benchmark.
  mo.kv_cache_tokens = o.num_prompts * (o.input_len + o.output_len + mo.page_size);
  mo.progress = !o.json;
  const auto load_start = std::chrono::steady_clock::now();
  const std::unique_ptr<model::Model> m = model::Model::load(o.model, mo);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  engine::EngineOptions eo;
  eo.prefix_caching = !o.no_prefix_caching;
  engine::Engine e(*m, eo);
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  std::map<int64_t, size_t> index;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    engine::Request r;
    r.prompt.resize(size_t(o.input_len));
    for (int32_t& t : r.prompt) t = id(rng);
    r.max_tokens = o.output_len;
    r.sampling = model::GenerateOptions::greedy();  // stop ids none: every request runs output_len tokens
    index[e.add(std::move(r))] = size_t(i);
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> first(size_t(o.num_prompts), -1), last(size_t(o.num_prompts), 0);
  std::vector<int64_t> count(size_t(o.num_prompts), 0);
  std::vector<double> step_seconds;
  while (!e.idle()) {
    const auto step_start = std::chrono::steady_clock::now();
    const std::vector<engine::StepOutput> out = e.step();
    const auto now = std::chrono::steady_clock::now();
    step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
    const double t = std::chrono::duration<double>(now - start).count();
    for (const engine::StepOutput& s : out) {
      const size_t i = index.at(s.id);
      if (first[i] < 0) first[i] = t;
      last[i] = t;
      ++count[i];
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> ttft, tpot;
  int64_t generated = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    ttft.push_back(first[i]);
    if (count[i] > 1) tpot.push_back((last[i] - first[i]) / double(count[i] - 1));
    generated += count[i];
  }
  const engine::EngineStats& st = e.stats();
  nlohmann::json j{{"model", o.model},
                   {"device", o.device},
                   {"num_prompts", o.num_prompts},
                   {"input_len", o.input_len},
                   {"output_len", o.output_len},
                   {"max_num_seqs", o.max_num_seqs},
                   {"max_num_batched_tokens", o.max_num_batched_tokens},
                   {"load_seconds", load_seconds},
                   {"seconds", wall},
                   {"requests_per_second", double(o.num_prompts) / wall},
                   {"output_tokens_per_second", double(generated) / wall},
                   {"total_tokens_per_second", double(generated + o.num_prompts * o.input_len) / wall},
                   {"ttft", summary(ttft)},
                   {"tpot", summary(tpot)},
                   {"step", summary(step_seconds)},
                   {"steps", st.steps},
                   {"preemptions", st.preemptions},
                   {"prefix_hit_tokens", st.prefix_hit_tokens}};
  if (o.json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("%lld requests of %lld prompt + %lld output tokens in %.2f s: %.2f requests/s, %.1f output tokens/s\n",
              static_cast<long long>(o.num_prompts), static_cast<long long>(o.input_len),
              static_cast<long long>(o.output_len), wall, double(o.num_prompts) / wall, double(generated) / wall);
  std::printf("TTFT p50 %.1f ms, p99 %.1f ms; TPOT p50 %.2f ms, p99 %.2f ms; %lld steps, %lld preemptions\n",
              j["ttft"]["p50_ms"].get<double>(), j["ttft"]["p99_ms"].get<double>(), j["tpot"]["p50_ms"].get<double>(),
              j["tpot"]["p99_ms"].get<double>(), static_cast<long long>(st.steps),
              static_cast<long long>(st.preemptions));
}

}  // namespace

void add_throughput(CLI::App& app) {
  auto* cmd = app.add_subcommand("throughput",
                                 "Engine benchmark: N random-prompt requests at once through continuous batching");
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Hugging Face checkpoint directory")->required();
  cmd->add_option("--device", o->device, "cpu (default) or cuda");
  cmd->add_option("--num-prompts", o->num_prompts, "Requests (default 8)");
  cmd->add_option("--input-len", o->input_len, "Prompt tokens per request (default 128)");
  cmd->add_option("--output-len", o->output_len, "New tokens per request (default 32)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per step (default 8)");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step (default 512)");
  cmd->add_option("--seed", o->seed, "Seed of the random prompts (default 0)");
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Do not share cached prompt pages");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] { run(*o); });
}

}  // namespace onecat::cli
