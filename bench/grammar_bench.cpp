// The host cost of structured outputs per token (docs/serve.md, "Structured outputs"): walks
// through a grammar over a real vocabulary, each step the allowed-token mask
// (GrammarConstraint::allowed, a trie walk the first time a state is met, a lookup after) and
// taking a token drawn among the allowed ones, and beside it the host sampler on one row of the
// vocabulary with and without the mask (cpu::sample). The first walk meets every state cold; the
// later ones share its automaton, as a server's requests with one schema do. Prints JSON.
//   grammar_bench VOCABULARY [WALKS] [TOKENS]   (a .gguf or a checkpoint directory)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/regex_grammar.h"
#include "models/tokenizer/tokenizer.h"
#include "runtime/cpu/sampling.h"

namespace {

using Clock = std::chrono::steady_clock;
using onecat::engine::GrammarAutomaton;
using onecat::engine::GrammarConstraint;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

// A pydantic-style schema: nested objects, an array, an enum, a date, bounded integers, a pattern.
const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "email": {"type": "string", "format": "email"}, "born": {"type": "string", "format": "date"},
  "role": {"enum": ["admin", "user", "guest"]}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
  "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string",
    "pattern": "^[0-9]{5}$"}}, "required": ["street", "zip"]}, "score": {"type": ["number", "null"]}},
  "required": ["name", "age", "email", "born", "role", "tags", "address", "score"]})";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: grammar_bench VOCABULARY [WALKS] [TOKENS]\n");
    return 2;
  }
  try {
    const onecat::tokenizer::Tokenizer tok = onecat::tokenizer::Tokenizer::load(argv[1]);
    const int walks = argc > 2 ? std::atoi(argv[2]) : 20;
    const int tokens = argc > 3 ? std::atoi(argv[3]) : 200;
    auto t = Clock::now();
    const std::vector<std::string> bytes = tok.token_bytes();
    const double bytes_ms = ms_since(t);
    const int64_t vocab = int64_t(bytes.size());
    t = Clock::now();
    auto words = std::make_shared<const onecat::engine::TokenVocabulary>(bytes, vocab);
    const double trie_ms = ms_since(t);
    const std::vector<int32_t> ends = tok.eos_token_ids();

    nlohmann::json out{{"vocabulary", argv[1]},
                       {"tokens", vocab},
                       {"token_bytes_ms", bytes_ms},
                       {"trie_ms", trie_ms},
                       {"trie_nodes", words->trie().size()},
                       {"workloads", nlohmann::json::array()}};
    struct Workload {
      const char* name;
      onecat::engine::Grammar grammar;
    };
    std::vector<Workload> workloads;
    workloads.push_back({"json_object", onecat::engine::json_object_grammar()});
    workloads.push_back({"json_schema", onecat::engine::json_schema_grammar(nlohmann::ordered_json::parse(kSchema))});
    workloads.push_back({"regex", onecat::engine::regex_grammar(R"(([A-Z][a-z]+ ){2,6}\(\d{3}\) \d{3}-\d{4}\.)")});
    std::mt19937 rng(1);
    for (Workload& w : workloads) {
      t = Clock::now();
      auto automaton = std::make_shared<GrammarAutomaton>(w.grammar, words);
      const double build_ms = ms_since(t);
      std::vector<double> first, later;
      int finished = 0;
      for (int walk = 0; walk < walks; ++walk) {
        GrammarConstraint c(automaton, ends);
        for (int step = 0; step < tokens && !c.finished(); ++step) {
          const auto start = Clock::now();
          const onecat::engine::TokenMask& m = c.allowed();
          (walk == 0 ? first : later).push_back(ms_since(start));
          // A model's pick among the allowed: any (half the time), a single byte or an end, or a
          // token that closes something (a quote, bracket or comma: so walks end).
          std::vector<int32_t> allowed, short_ones, closing;
          for (int32_t id = 0; id < vocab; ++id) {
            if (!onecat::engine::mask_has(m, id)) continue;
            allowed.push_back(id);
            const std::string& b = bytes[size_t(id)];
            if (b.size() == 1 || std::count(ends.begin(), ends.end(), id)) short_ones.push_back(id);
            if (b.find_first_of("\"]},") != std::string::npos) closing.push_back(id);
          }
          if (allowed.empty()) break;
          const unsigned pick = rng() % 4;
          const std::vector<int32_t>& from = pick == 2 && !short_ones.empty() ? short_ones
                                             : pick == 3 && !closing.empty()  ? closing
                                                                              : allowed;
          c.accept(from[rng() % from.size()]);
        }
        finished += c.finished();
      }
      std::vector<double> all = first;
      all.insert(all.end(), later.begin(), later.end());
      double sum = 0;
      for (double x : all) sum += x;
      out["workloads"].push_back({{"name", w.name},
                                  {"build_ms", build_ms},
                                  {"walks", walks},
                                  {"finished", finished},
                                  {"steps", all.size()},
                                  {"mask_ms_mean", all.empty() ? 0 : sum / double(all.size())},
                                  {"mask_ms_p50", percentile(all, 0.5)},
                                  {"mask_ms_p99", percentile(all, 0.99)},
                                  {"mask_ms_max", percentile(all, 1.0)},
                                  {"first_walk_ms_mean", first.empty() ? 0 : [&] {
                                     double s = 0;
                                     for (double x : first) s += x;
                                     return s / double(first.size());
                                   }()},
                                  {"later_walks_ms_p50", percentile(later, 0.5)},
                                  {"states", automaton->states()},
                                  {"stack_nodes", automaton->stack_nodes()}});
    }
    // The host sampler on one row, plain and under a mask (the in-string state: most tokens).
    std::vector<float> logits(static_cast<size_t>(vocab));
    std::normal_distribution<float> normal(0.f, 3.f);
    for (float& l : logits) l = normal(rng);
    auto automaton = std::make_shared<GrammarAutomaton>(onecat::engine::json_object_grammar(), words);
    const int32_t in_string = automaton->step(automaton->start(), std::string("{\"a\": \"x"));
    const std::shared_ptr<const onecat::engine::TokenMask> mask = automaton->mask(in_string);
    onecat::cpu::SamplingParams p;
    auto sample_ms = [&](const uint32_t* allowed) {
      std::vector<double> v;
      for (int i = 0; i < 30; ++i) {
        const onecat::cpu::SampleRow row{logits.data(), &p, {}, {}, uint64_t(i), false, allowed};
        const auto start = Clock::now();
        (void)onecat::cpu::sample_rows({&row, 1}, vocab);
        v.push_back(ms_since(start));
      }
      return percentile(v, 0.5);
    };
    // Logits as a model's are peaked: normal with σ 3 (the top token some 14 above the mean).
    for (const auto& [name, temperature, top_p] :
         {std::tuple{"greedy", 0.f, 1.f}, std::tuple{"temperature 0.8", 0.8f, 1.f},
          std::tuple{"temperature 0.8, top_p 0.95", 0.8f, 0.95f}}) {
      p.temperature = temperature, p.top_p = top_p;
      out["sample_ms_p50"][name] = {{"plain", sample_ms(nullptr)}, {"masked", sample_ms(mask->data())}};
    }
    std::printf("%s\n", out.dump(2).c_str());
  } catch (const onecat::Error& e) {
    std::fprintf(stderr, "grammar_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
