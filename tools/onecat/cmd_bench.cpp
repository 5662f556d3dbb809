#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "runtime/engine/session.h"
#include "tools/onecat/commands.h"
#include "tuner/bench.h"

namespace onecat::cli {
namespace {

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1 || v > (1 << 20)) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError("--m: " + quoted_input(item) + " is not a token count (write e.g. --m 1,2,4,16)");
    }
  }
  if (out.empty()) throw InputError("--m needs at least one token count");
  return out;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Time a kernel of any family on this GPU at several token counts against its ceilings and its peer");
  auto spec = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  auto ms = std::make_shared<std::string>("1,2,4,8,16,32,64,128,256,512,2048");
  auto json = std::make_shared<bool>(false);
  auto sweep = std::make_shared<bool>(false);
  auto graph = std::make_shared<bool>(false);
  cmd->add_flag("--sweep", *sweep, "Time every candidate config for each M and report the fastest (with the default's time)");
  cmd->add_flag("--graph", *graph,
                "Time each batch of launches replayed from a CUDA graph (ours and the peer alike), without the stream's "
                "launch-to-launch gap");
  cmd->add_option("spec", *spec, "Kernel spec, e.g. gemm:n=4096,k=4096,fmt=awq4 or attention:op=decode,...")->required();
  cmd->add_option("--config", *config, "Config for every M (default: the family default per M)");
  cmd->add_option("--m", *ms, "Token counts (sequences for attention decode and verify), comma separated");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([=] {
    BenchOptions options;
    options.config = *config;
    options.sweep = *sweep;
    options.graph = *graph;
    const std::vector<int64_t> counts = parse_list(*ms);
    const BenchResult b = bench_spec(Session::get(), *spec, counts, options);
    if (*json) {
      nlohmann::json pts = nlohmann::json::array();
      for (const auto& p : b.points) {
        nlohmann::json swept = nlohmann::json::array();
        for (const auto& [c, us] : p.swept) swept.push_back({{"config", c}, {"us", us}});
        pts.push_back({{"m", p.m}, {"config", p.config}, {"us", p.ours.median_us}, {"us_min", p.ours.min_us},
                       {"us_max", p.ours.max_us}, {"bytes", p.bytes}, {"gbps", p.gbps}, {"pct_copy", p.pct_copy},
                       {"bandwidth_floor_us", p.bandwidth_floor_us}, {"flops", p.flops}, {"tflops", p.tflops},
                       {"pct_peak", p.pct_peak}, {"flop_floor_us", p.flop_floor_us}, {"peer_us", p.peer_us},
                       {"speedup_vs_peer", p.speedup_vs_peer}, {"error_vs_peer", p.error_vs_peer},
                       {"error_vs_reference", p.error_vs_reference}, {"default_config", p.default_config},
                       {"default_us", p.default_us}, {"candidates", p.candidates}, {"swept", swept}});
      }
      std::cout << nlohmann::json{{"spec", b.spec}, {"family", b.family}, {"device", b.device}, {"copy_gbps", b.copy_gbps},
                                  {"peak_tflops", b.peak_tflops}, {"peer", b.peer},
                                  {"timing", options.graph ? "graph" : "stream"}, {"points", pts}}
                       .dump(2)
                << "\n";
      return;
    }
    std::printf("%s on %s (copy %.0f GB/s", b.spec.c_str(), b.device.c_str(), b.copy_gbps);
    if (b.peak_tflops > 0) std::printf(", cuBLAS fp16 %.0f TFLOP/s", b.peak_tflops);
    std::printf(", %s)\n", options.graph ? "launches replayed from a CUDA graph" : "back-to-back stream launches");
    // floor: the longer of the two ceilings as a time (bytes at the copy bandwidth, flops at the fp16 rate).
    std::printf("%6s %-34s %9s %9s %6s %8s %6s %9s", "m", "config", "us", "GB/s", "%copy", "TFLOP/s", "%peak", "floor us");
    if (!b.peer.empty()) std::printf(" %10s %8s %9s", (b.peer + " us").c_str(), "speedup", "err");
    std::printf(" %11s\n", "default us");
    for (const auto& p : b.points) {
      std::printf("%6lld %-34s %9.2f %9.0f %6.1f %8.2f %6.1f %9.2f", (long long)p.m, p.config.c_str(), p.ours.median_us,
                  p.gbps, p.pct_copy, p.tflops, p.pct_peak, std::max(p.bandwidth_floor_us, p.flop_floor_us));
      if (!b.peer.empty()) std::printf(" %10.2f %8.2f %9.2e", p.peer_us, p.speedup_vs_peer, p.error_vs_peer);
      std::printf(" %11.2f\n", p.default_us > 0 ? p.default_us : p.ours.median_us);
    }
  });
}

}  // namespace onecat::cli
