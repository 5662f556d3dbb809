// onecat step-cost: what a speculative-decoding verify step costs against a plain decode step
// (issue 29's mechanism figure; docs/engine.md). B sequences of random prompts of --context
// tokens; per batch B and draft count k, the mean wall time of steps that give every sequence one
// new token (a decode step) and of steps that verify k drafts of each (blocks of k + 1 tokens,
// every row's logits argmaxed: what the engine's verify step runs), each timed from the same
// context (the sequences are rewound after every step, as a rejection rolls back), after a
// warm-up step that captures its CUDA graph. Random weights make acceptance meaningless, so this
// times the mechanism: a verify step that costs r decode steps pays when more than r − 1 drafts
// are accepted on average.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/checkpoint/locate.h"
#include "models/config.h"
#include "models/model/model.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

struct Options {
  std::string model, device = "auto", batches = "1,8,32", drafts = "2,4,8", kv_cache_dtype = "auto";
  int64_t context = 1024, steps = 20;
  uint64_t seed = 0;
  bool json = false, cuda_graphs = true;
};

std::vector<int64_t> positive_list(const std::string& text, const std::string& option, int64_t most) {
  std::vector<int64_t> out;
  for (int32_t v : parse_ids(text, option)) {
    if (v < 1 || v > most) {
      throw InputError(option + " takes numbers from 1 to " + std::to_string(most) + ", got " + std::to_string(v) +
                       ".");
    }
    out.push_back(v);
  }
  if (out.empty()) throw InputError(option + " needs at least one number.");
  return out;
}

void run(const Options& o) {
  const std::vector<int64_t> batches = positive_list(o.batches, "--batches", 1024);
  const std::vector<int64_t> drafts = positive_list(o.drafts, "--drafts", model::kMaxVerifyBlock - 1);
  if (o.context < 1 || o.steps < 1) throw InputError("--context and --steps must be at least 1.");
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  const int64_t max_block = *std::max_element(drafts.begin(), drafts.end()) + 1;

  model::ModelOptions mo;
  mo.device = resolve_device(o.device, "step-cost");
  mo.max_sequences = int(max_batch);
  mo.max_batch_tokens = std::max<int64_t>(max_batch * max_block, 256);
  mo.kv_cache_tokens = max_batch * (o.context + max_block + 16);
  mo.max_model_len = o.context + max_block + 16;
  mo.kv_cache_dtype = models::parse_kv_cache_dtype(o.kv_cache_dtype);
  mo.cuda_graphs = o.cuda_graphs;
  mo.progress = !o.json;
  const std::unique_ptr<model::Model> m = model::Model::load(o.model, mo);
  m->prepare_verify(int(max_block));
  m->capture_graphs(int(max_batch));
  const int64_t vocab = m->config().vocab;

  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  auto random_ids = [&](int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& t : v) t = id(rng);
    return v;
  };
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t b : batches) {
    std::vector<model::Sequence> seqs(static_cast<size_t>(b));
    for (model::Sequence& s : seqs) m->extend(s, random_ids(o.context));
    // Mean seconds (wall, and the GPU's share) of a step of blocks of q tokens.
    auto time_steps = [&](int64_t q) {
      std::vector<std::vector<int32_t>> tokens(seqs.size());
      double wall = 0, gpu = 0;
      for (int64_t step = -1; step < o.steps; ++step) {  // step −1: the warm-up
        std::vector<model::Model::Chunk> chunks;
        for (size_t i = 0; i < seqs.size(); ++i) {
          tokens[i] = random_ids(q);
          chunks.push_back({&seqs[i], tokens[i], q > 1});
        }
        const auto start = std::chrono::steady_clock::now();
        m->step_greedy(chunks);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (step >= 0) wall += seconds, gpu += m->last_step_gpu_seconds();
        for (model::Sequence& s : seqs) s.length = o.context;  // rewound: every step from the same context
      }
      return std::pair{wall / double(o.steps), gpu / double(o.steps)};
    };
    const auto [decode, decode_gpu] = time_steps(1);
    for (int64_t k : drafts) {
      const auto [verify, verify_gpu] = time_steps(k + 1);
      rows.push_back({{"batch", b},
                      {"k", k},
                      {"decode_ms", 1e3 * decode},
                      {"verify_ms", 1e3 * verify},
                      {"ratio", verify / decode},
                      {"decode_gpu_ms", 1e3 * decode_gpu},
                      {"verify_gpu_ms", 1e3 * verify_gpu}});
    }
    for (model::Sequence& s : seqs) m->release(s);
  }
  const nlohmann::json j{{"model", o.model}, {"device", o.device},           {"context", o.context},
                         {"steps", o.steps}, {"cuda_graphs", o.cuda_graphs}, {"kv_cache_dtype", o.kv_cache_dtype},
                         {"rows", rows}};
  if (o.json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("context %lld tokens, %lld timed steps each\n", static_cast<long long>(o.context),
              static_cast<long long>(o.steps));
  Table t({"batch", "k", "decode ms", "verify ms", "verify / decode"}, {0, 1, 2, 3, 4});
  char buf[3][32];
  for (const nlohmann::json& r : rows) {
    std::snprintf(buf[0], sizeof buf[0], "%.3f", r["decode_ms"].get<double>());
    std::snprintf(buf[1], sizeof buf[1], "%.3f", r["verify_ms"].get<double>());
    std::snprintf(buf[2], sizeof buf[2], "%.2f", r["ratio"].get<double>());
    t.row({r["batch"].dump(), r["k"].dump(), buf[0], buf[1], buf[2]});
  }
  t.print();
}

}  // namespace

void add_step_cost(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("step-cost", "Speculative decoding's mechanism: a verify step's time against a decode step's");
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Hugging Face checkpoint directory")->required();
  add_device_option(cmd, o->device);
  cmd->add_option("--batches", o->batches, "Sequences per step, comma-separated (default 1,8,32)");
  cmd->add_option("--drafts", o->drafts, "Draft tokens k per sequence, comma-separated (default 2,4,8)");
  cmd->add_option("--context", o->context, "Tokens each sequence holds before the timed steps (default 1024)");
  cmd->add_option("--steps", o->steps, "Timed steps per point (default 20)");
  cmd->add_option("--seed", o->seed, "Seed of the random ids (default 0)");
  add_kv_cache_dtype_option(cmd, o->kv_cache_dtype);
  cmd->add_flag("!--no-cuda-graphs", o->cuda_graphs, "cuda: run the steps op by op");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    o->model = models::locate_checkpoint(o->model);  // a hub id: its cached snapshot
    run(*o);
  });
}

}  // namespace onecat::cli
