// How long Dispatcher::kernel_for takes once a spec's buckets are prepared: the engine's
// per-op cost of choosing a kernel. CPU only. Prints ns per lookup and writes JSON to argv[1].
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "runtime/engine/dispatch.h"

int main(int argc, char** argv) {
  onecat::Dispatcher d([](const std::string& spec, int64_t bucket) {
    return onecat::DispatchEntry{nullptr, spec + "@" + std::to_string(bucket), true};
  });
  std::vector<int> handles;
  for (int i = 0; i < 64; ++i) handles.push_back(d.add_spec("gemm:op" + std::to_string(i)));
  std::mt19937 rng(1);
  std::vector<std::pair<int, int64_t>> calls(1 << 16);
  for (auto& c : calls) c = {handles[rng() % handles.size()], 1 + int64_t(rng() % 4096)};
  for (auto [h, m] : calls) d.kernel_for(h, m);  // prepare every (spec, bucket) used
  constexpr int kRounds = 200;
  size_t sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRounds; ++r) {
    for (auto [h, m] : calls) sink += d.kernel_for(h, m).config.size();
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
                    (double(kRounds) * double(calls.size()));
  std::printf("Dispatcher::kernel_for: %.1f ns per lookup (64 specs, random M in 1..4096; checksum %zu)\n", ns, sink);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (!f) return 1;
    std::fprintf(f, "{\"ns_per_lookup\": %.2f, \"specs\": 64, \"lookups\": %zu}\n", ns, size_t(kRounds) * calls.size());
    std::fclose(f);
  }
  return 0;
}
