// Single-threaded encode throughput of onecat's tokenizer: loads a model, encodes every
// document of a JSON-lines file (one JSON string per line) REPEAT times, prints JSON with
// the best CPU time.
// Driven by bench/tokenizer_bench.py, which runs Hugging Face tokenizers beside it.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/tokenizer/tokenizer.h"

namespace {

// CPU time, not wall time: the figure should not depend on what else the machine runs.
double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_bench MODEL DOCS.jsonl [REPEAT]\n");
    return 2;
  }
  try {
    auto load_start = std::chrono::steady_clock::now();
    onecat::tokenizer::Tokenizer tok = onecat::tokenizer::Tokenizer::load(argv[1]);
    double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    int repeat = argc > 3 ? std::atoi(argv[3]) : 3;
    std::vector<std::string> docs;
    std::ifstream in(argv[2]);
    size_t bytes = 0;
    for (std::string line; std::getline(in, line);) {
      docs.push_back(nlohmann::json::parse(line).get<std::string>());
      bytes += docs.back().size();
    }
    double best = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < repeat; ++r) {
      tokens = 0;
      double start = cpu_seconds();
      for (const auto& d : docs) tokens += tok.encode(d, false).size();
      best = std::min(best, cpu_seconds() - start);
    }
    std::cout << nlohmann::json{{"bytes", bytes},
                                {"tokens", tokens},
                                {"seconds", best},
                                {"load_seconds", load_s},
                                {"mb_per_s", bytes / best / 1e6}}
                     .dump()
              << "\n";
  } catch (const onecat::Error& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
