// onecat audit: the quality gates of speculative decoding as one command (issue 29, docs/engine.md).
//   1. greedy A/B identity: a prompt set through the engine with speculation and without, token
//      for token, the first divergence reported;
//   2. perplexity of a text file (--text) one token a step (as a plain decode runs) and in
//      chunks of k + 1 tokens with every row's logits (as a verify step runs): within 1e-4;
//   3. natural stops (an EOS id before max_tokens) and mean output length, equal both ways;
//   4. (--against default,cpu) greedy A/B of the target against itself with default configs
//      (no tuning record read) and against the CPU backend: identical, or each prompt's first
//      divergence at a near tie (the variant's logits of the two tokens within kTie of their
//      row's spread: fp16 rounding in another order, not a wrong kernel).
// A pass/fail table, or --json; exit status 1 when a gate fails.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/engine.h"
#include "engine/greedy_ab.h"
#include "models/checkpoint/locate.h"
#include "models/config.h"
#include "models/model/generate.h"
#include "models/model/generation_config.h"
#include "models/model/model.h"
#include "models/tokenizer/tokenizer.h"
#include "runtime/cpu/sampling.h"
#include "runtime/engine/session.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

struct Options {
  std::string model, device = "auto", text, prompts, against;
  int max_num_seqs = 8;
  engine::EngineOptions spec = {.num_speculative_tokens = 4};  // the speculative-decoding flags' fields
  int64_t max_tokens = 64, max_num_batched_tokens = 256, text_tokens = 1024;
  bool json = false;
};

// The default prompt set: text that invites both natural stops and repetition (n-gram drafts).
const char* const kPrompts[] = {
    "The capital of France is",
    "Rewrite this function with the same behaviour:\ndef add(a, b):\n    return a + b\n\ndef add(a, b):\n",
    "List the days of the week: Monday, Tuesday, Wednesday,",
    "Q: What is 12 times 12?\nA:",
    "Once upon a time, in a small village by the sea,",
    "Translate to French: Good morning, how are you?\n",
    "int main() {\n  for (int i = 0; i < 10; ++i) {\n",
    "A haiku about autumn leaves:\n",
};

std::optional<tokenizer::Tokenizer> tokenizer_of(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) return std::nullopt;
  return tokenizer::Tokenizer::from_hf_directory(dir);
}

// --prompts: one JSON object a line, {"prompt": "text"} or {"prompt_ids": [...]}; else the
// default set, encoded (or, without a tokenizer, prompts of repeated random ids).
std::vector<std::vector<int32_t>> prompt_set(const Options& o, const std::optional<tokenizer::Tokenizer>& tok,
                                             int64_t vocab) {
  std::vector<std::vector<int32_t>> out;
  if (!o.prompts.empty()) {
    std::ifstream in(o.prompts);
    if (!in) throw InputError("cannot read --prompts " + o.prompts + ".");
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = o.prompts + " line " + std::to_string(number);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      std::vector<int32_t> ids;
      if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
        if (!tok) throw InputError(where + " has a text prompt, but " + o.model + " has no tokenizer.json.");
        ids = tok->encode(j["prompt"].get<std::string>());
      } else if (j.is_object() && j.contains("prompt_ids") && j["prompt_ids"].is_array()) {
        for (const nlohmann::json& id : j["prompt_ids"]) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
            throw InputError(where + ": prompt_ids holds " + id.dump() + ", not an id in [0, " + std::to_string(vocab) +
                             ").");
          }
          ids.push_back(id.get<int32_t>());
        }
      } else {
        throw InputError(where + " must be a JSON object with \"prompt\" (text) or \"prompt_ids\" (ids).");
      }
      if (ids.empty()) throw InputError(where + ": the prompt has no tokens.");
      out.push_back(std::move(ids));
    }
    if (out.empty()) throw InputError("--prompts " + o.prompts + " holds no prompts.");
    return out;
  }
  if (tok) {
    for (const char* p : kPrompts) out.push_back(tok->encode(p));
    return out;
  }
  std::mt19937 rng(29);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> motif(size_t(3 + i % 5)), p;
    for (int32_t& t : motif) t = id(rng);
    for (int r = 0; r < 1 + i % 4; ++r) p.insert(p.end(), motif.begin(), motif.end());
    out.push_back(std::move(p));
  }
  return out;
}

struct Run {
  std::vector<std::vector<int32_t>> outputs;
  std::vector<bool> stopped;  // ended at a stop id
  engine::EngineStats stats;
};

Run greedy_run(model::Model& m, const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& eos,
               const Options& o, int k) {
  engine::EngineOptions eo = o.spec;
  eo.num_speculative_tokens = k;
  engine::Engine e(m, eo);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::Request r;
    r.prompt = prompts[i];
    r.max_tokens = o.max_tokens;
    r.sampling = model::GenerateOptions::greedy();
    r.stop_ids = eos;
    index[e.add(std::move(r))] = i;
  }
  Run run;
  run.outputs.resize(prompts.size());
  run.stopped.resize(prompts.size(), false);
  while (!e.idle()) {
    for (const engine::StepOutput& s : e.step()) {
      const size_t i = index.at(s.id);
      run.outputs[i].push_back(s.token);
      if (s.finished) run.stopped[i] = s.finish_reason == "stop";
    }
  }
  run.stats = e.stats();
  return run;
}

// Mean negative log-likelihood of tokens[1:] given what precedes each, the model run in chunks of
// `chunk` tokens with every row's logits.
double mean_nll(model::Model& m, const std::vector<int32_t>& tokens, int64_t chunk) {
  const int64_t vocab = m.config().vocab;
  model::Sequence s;
  double nll = 0;
  for (size_t begin = 0; begin + 1 < tokens.size(); begin += size_t(chunk)) {
    const size_t end = std::min(tokens.size() - 1, begin + size_t(chunk));
    const std::vector<float> logits = m.extend(s, std::span(tokens).subspan(begin, end - begin), /*all_logits=*/true);
    for (size_t t = begin; t < end; ++t) {
      nll -= cpu::token_logprobs(logits.data() + (t - begin) * size_t(vocab), vocab, tokens[t + 1], 0).logprob;
    }
  }
  m.release(s);
  return nll / double(tokens.size() - 1);
}

// A divergence between two backends' greedy outputs counts as a near tie when the variant's
// logits of the two tokens differ by at most this share of the row's spread (max − min): the
// bound the GPU tests hold the GPU's greedy tokens to against the CPU forward.
constexpr double kTie = 2e-3;

// Gate 4 for one variant (engine::compare_greedy), as JSON.
nlohmann::json ab_gate(model::Model& variant, const Run& target, const Run& other,
                       const std::vector<std::vector<int32_t>>& prompts) {
  const engine::GreedyAb ab = engine::compare_greedy(variant, prompts, target.outputs, other.outputs, kTie);
  nlohmann::json first = nullptr;
  if (ab.first) {
    const auto token = [](const std::optional<int32_t>& t) { return t ? nlohmann::json(*t) : nlohmann::json("end"); };
    first = {{"prompt", ab.first->prompt},        {"position", ab.first->position},
             {"target", token(ab.first->target)}, {"variant", token(ab.first->variant)},
             {"gap_of_spread", ab.first->gap},    {"near_tie", ab.first->near_tie}};
  }
  return {{"identical", ab.identical},
          {"near_tie_divergences", ab.near_ties},
          {"divergences", ab.divergences},
          {"first_divergence", first},
          {"pass", ab.pass()}};
}

std::string shown(const std::optional<tokenizer::Tokenizer>& tok, int32_t id) {
  std::string s = std::to_string(id);
  if (tok) s += " " + nlohmann::json(tok->decode(std::vector<int32_t>{id})).dump();
  return s;
}

void run(const Options& o) {
  if (o.spec.num_speculative_tokens < 1) throw InputError("--num-draft-tokens must be at least 1.");
  if (o.max_tokens < 1) throw InputError("--max-tokens must be at least 1.");
  if (o.text_tokens < 2) throw InputError("--text-tokens must be at least 2.");
  std::vector<std::string> variants;
  for (size_t at = 0; !o.against.empty() && at <= o.against.size();) {
    const size_t comma = std::min(o.against.find(',', at), o.against.size());
    const std::string v = o.against.substr(at, comma - at);
    if (v != "default" && v != "cpu") {
      throw InputError("--against takes default and cpu (comma-separated), not \"" + v + "\".");
    }
    if (v == "cpu" && model::parse_device(o.device) != model::Device::kCuda) {
      throw InputError("--against cpu compares the GPU with the CPU backend: it needs a GPU (--device cuda).");
    }
    variants.push_back(v);
    at = comma + 1;
  }
  const std::optional<tokenizer::Tokenizer> tok = tokenizer_of(o.model);
  const int64_t vocab = models::load_model(o.model).vocab;
  const std::vector<std::vector<int32_t>> prompts = prompt_set(o, tok, vocab);
  std::vector<int32_t> text;
  if (!o.text.empty()) {
    if (!tok) throw InputError("--text needs the checkpoint's tokenizer.json, and " + o.model + " has none.");
    std::ifstream in(o.text);
    if (!in) throw InputError("cannot read --text " + o.text + ".");
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = tok->encode(buffer.str());
    if (int64_t(text.size()) > o.text_tokens) text.resize(size_t(o.text_tokens));
    if (text.size() < 2) throw InputError("--text " + o.text + " encodes to fewer than 2 tokens.");
  }
  std::vector<int32_t> eos = tok ? tok->eos_token_ids() : std::vector<int32_t>{};
  for (int32_t id : model::eos_token_ids(o.model)) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }

  model::ModelOptions mo;
  mo.device = resolve_device(o.device, "audit");
  mo.max_batch_tokens = o.max_num_batched_tokens;
  mo.max_sequences = o.max_num_seqs;
  int64_t pool = int64_t(text.size()) + 16;
  int64_t all = 0;
  for (const auto& p : prompts) all += int64_t(p.size()) + o.max_tokens + o.spec.num_speculative_tokens + 16;
  mo.kv_cache_tokens = std::max(pool, all);
  mo.progress = false;
  std::unique_ptr<model::Model> m = model::Model::load(o.model, mo);

  // 1 and 3: greedy, target alone and with speculation.
  const Run target = greedy_run(*m, prompts, eos, o, 0);
  const Run spec = greedy_run(*m, prompts, eos, o, o.spec.num_speculative_tokens);
  nlohmann::json divergence = nullptr;
  int64_t identical = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& a = target.outputs[i];
    const auto& b = spec.outputs[i];
    if (a == b) {
      ++identical;
      continue;
    }
    if (!divergence.is_null()) continue;
    size_t t = 0;
    while (t < a.size() && t < b.size() && a[t] == b[t]) ++t;
    divergence = {{"prompt", i},
                  {"position", t},
                  {"target", t < a.size() ? nlohmann::json(a[t]) : nlohmann::json("end")},
                  {"speculative", t < b.size() ? nlohmann::json(b[t]) : nlohmann::json("end")}};
    if (tok) {
      divergence["target_text"] = t < a.size() ? shown(tok, a[t]) : "end";
      divergence["speculative_text"] = t < b.size() ? shown(tok, b[t]) : "end";
    }
  }
  auto stop_figures = [&](const Run& r) {
    int64_t stops = 0, tokens = 0;
    for (size_t i = 0; i < prompts.size(); ++i) stops += r.stopped[i], tokens += int64_t(r.outputs[i].size());
    return nlohmann::json{{"natural_stop_rate", double(stops) / double(prompts.size())},
                          {"mean_output_length", double(tokens) / double(prompts.size())}};
  };
  const nlohmann::json stops_target = stop_figures(target), stops_spec = stop_figures(spec);
  const engine::EngineStats& st = spec.stats;

  // 2: perplexity one token a step and in verify-sized chunks.
  nlohmann::json perplexity = nullptr;
  bool perplexity_ok = true;
  if (!text.empty()) {
    const double plain = std::exp(mean_nll(*m, text, 1));
    const double verify = std::exp(mean_nll(*m, text, o.spec.num_speculative_tokens + 1));
    const double relative = std::abs(verify - plain) / plain;
    perplexity_ok = relative <= 1e-4;
    perplexity = {{"tokens", text.size()},
                  {"target", plain},
                  {"speculative", verify},
                  {"relative_difference", relative},
                  {"pass", perplexity_ok}};
  }

  // 4: the target against itself on default configs and on the CPU backend, one model at a time
  // (an 8B target and its variant need not fit together).
  nlohmann::json against = nlohmann::json::object();
  bool against_ok = true;
  if (!variants.empty()) m.reset();
  for (const std::string& v : variants) {
    model::ModelOptions vo = mo;
    if (v == "cpu") vo.device = model::Device::kCpu;
    if (v == "default") {
      // An empty kernel cache: no tuning record is found, every op takes its default config.
      static const std::string empty = std::filesystem::temp_directory_path().string() + "/onecat-audit-defaults-" +
                                       std::to_string(std::random_device{}());
      std::filesystem::create_directories(empty);
      setenv("ONECAT_CACHE_DIR", empty.c_str(), 1);
      Session::get().reset();
    }
    std::unique_ptr<model::Model> variant = model::Model::load(o.model, vo);
    const Run other = greedy_run(*variant, prompts, eos, o, 0);
    against[v] = ab_gate(*variant, target, other, prompts);
    against_ok = against_ok && against[v]["pass"].get<bool>();
  }

  const bool identity_ok = identical == int64_t(prompts.size());
  const bool stops_ok = stops_target == stops_spec;
  const bool pass = identity_ok && perplexity_ok && stops_ok && against_ok;
  nlohmann::json j{{"model", o.model},
                   {"device", o.device},
                   {"speculative", o.spec.speculative},
                   {"num_draft_tokens", o.spec.num_speculative_tokens},
                   {"ngram", {o.spec.ngram_min, o.spec.ngram_max}},
                   {"draft_p_min", o.spec.draft_p_min},
                   {"prompts", prompts.size()},
                   {"max_tokens", o.max_tokens},
                   {"identity", {{"identical", identical}, {"first_divergence", divergence}, {"pass", identity_ok}}},
                   {"perplexity", perplexity},
                   {"stops", {{"target", stops_target}, {"speculative", stops_spec}, {"pass", stops_ok}}},
                   {"against", against},
                   {"acceptance",
                    {{"draft_tokens", st.draft_tokens},
                     {"accepted_tokens", st.accepted_tokens},
                     {"acceptance_rate", st.draft_tokens ? double(st.accepted_tokens) / double(st.draft_tokens) : 0.0},
                     {"mean_acceptance_length",
                      st.draft_rounds ? double(st.accepted_tokens + st.draft_rounds) / double(st.draft_rounds) : 0.0},
                     {"target_steps", {{"target", target.stats.steps}, {"speculative", st.steps}}}}},
                   {"pass", pass}};
  if (o.json) {
    std::cout << j.dump() << "\n";
  } else {
    Table table({"gate", "result", "detail"});
    std::string identity_detail = std::to_string(identical) + " of " + std::to_string(prompts.size()) + " identical";
    if (!divergence.is_null()) {
      identity_detail += "; first divergence: prompt " + divergence["prompt"].dump() + ", token " +
                         divergence["position"].dump() + ": target " + divergence["target"].dump() + ", speculative " +
                         divergence["speculative"].dump();
    }
    table.row({"greedy identity", identity_ok ? "PASS" : "FAIL", identity_detail});
    if (!perplexity.is_null()) {
      table.row(
          {"perplexity", perplexity_ok ? "PASS" : "FAIL",
           format("%.6g one token a step, %.6g in chunks of %d (relative %.2g, at most 1e-4; %zu tokens)",
                  perplexity["target"].get<double>(), perplexity["speculative"].get<double>(),
                  o.spec.num_speculative_tokens + 1, perplexity["relative_difference"].get<double>(), text.size())});
    } else {
      table.row({"perplexity", "-", "no --text given"});
    }
    table.row(
        {"natural stops", stops_ok ? "PASS" : "FAIL",
         format("target %.0f%% stopped, %.1f tokens on average; speculative %.0f%%, %.1f",
                100 * stops_target["natural_stop_rate"].get<double>(), stops_target["mean_output_length"].get<double>(),
                100 * stops_spec["natural_stop_rate"].get<double>(), stops_spec["mean_output_length"].get<double>())});
    for (const auto& [v, g] : against.items()) {
      std::string detail = g["identical"].dump() + " of " + std::to_string(prompts.size()) + " identical, " +
                           g["near_tie_divergences"].dump() + " parting at a near tie, " + g["divergences"].dump() +
                           " otherwise";
      if (!g["first_divergence"].is_null()) {
        const nlohmann::json& d = g["first_divergence"];
        detail += format("; first: prompt %s, token %s: target %s, %s %s (%.2g of the spread)",
                         d["prompt"].dump().c_str(), d["position"].dump().c_str(), d["target"].dump().c_str(),
                         v.c_str(), d["variant"].dump().c_str(), d["gap_of_spread"].get<double>());
      }
      table.row({v == "cpu" ? "GPU vs CPU" : "tuned vs default", g["pass"].get<bool>() ? "PASS" : "FAIL", detail});
    }
    table.row({"acceptance", "-",
               format("%lld of %lld drafts accepted, %.2f tokens per verifying step, %lld target steps vs %lld",
                      static_cast<long long>(st.accepted_tokens), static_cast<long long>(st.draft_tokens),
                      j["acceptance"]["mean_acceptance_length"].get<double>(), static_cast<long long>(st.steps),
                      static_cast<long long>(target.stats.steps))});
    table.print();
    std::printf("%s\n", pass ? "PASS" : "FAIL");
  }
  if (!pass) throw CLI::RuntimeError(1);
}

}  // namespace

void add_audit(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "audit", "Speculative decoding's quality gates: greedy identity, perplexity, natural stops (pass/fail)");
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Hugging Face checkpoint directory")->required();
  add_device_option(cmd, o->device);
  add_speculative_options(cmd, o->spec, "4");
  cmd->add_option("--prompts", o->prompts,
                  "JSONL prompts, {\"prompt\": \"text\"} or {\"prompt_ids\": [...]} a line (default: a built-in set)");
  cmd->add_option("--max-tokens", o->max_tokens, "New tokens per prompt at most (default 64)");
  cmd->add_option("--text", o->text, "A text file whose perplexity is compared (needs tokenizer.json)");
  cmd->add_option("--text-tokens", o->text_tokens, "The text's first N tokens (default 1024)");
  cmd->add_option("--against", o->against,
                  "Greedy A/B of the target against default configs and/or the CPU backend: default, cpu or "
                  "default,cpu (cpu needs --device cuda)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per step (default 8)");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step (default 256)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    o->model = models::locate_checkpoint(o->model);  // a hub id: its cached snapshot
    run(*o);
  });
}

}  // namespace onecat::cli
