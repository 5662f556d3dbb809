#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "runtime/engine/session.h"
#include "tools/onecat/commands.h"
#include "tuner/bench.h"

namespace onecat::cli {
namespace {

nlohmann::json points_json(const BenchResult& b) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : b.points) {
    nlohmann::json swept = nlohmann::json::array();
    for (const auto& [c, us] : p.swept) swept.push_back({{"config", c}, {"us", us}});
    pts.push_back({{"m", p.m},
                   {"config", p.config},
                   {"us", p.ours.median_us},
                   {"us_min", p.ours.min_us},
                   {"us_max", p.ours.max_us},
                   {"bytes", p.bytes},
                   {"gbps", p.gbps},
                   {"pct_copy", p.pct_copy},
                   {"bandwidth_floor_us", p.bandwidth_floor_us},
                   {"flops", p.flops},
                   {"tflops", p.tflops},
                   {"pct_peak", p.pct_peak},
                   {"flop_floor_us", p.flop_floor_us},
                   {"peer_us", p.peer_us},
                   {"speedup_vs_peer", p.speedup_vs_peer},
                   {"error_vs_peer", p.error_vs_peer},
                   {"error_vs_reference", p.error_vs_reference},
                   {"default_config", p.default_config},
                   {"default_us", p.default_us},
                   {"candidates", p.candidates},
                   {"swept", swept}});
  }
  return pts;
}

// One bench_spec result as JSON (`onecat bench --json`, and each line of --shapes --json).
nlohmann::json result_json(const BenchResult& b, const BenchOptions& options) {
  return {{"spec", b.spec},           {"family", b.family},
          {"context", b.context},     {"device", b.device},
          {"copy_gbps", b.copy_gbps}, {"peak_tflops", b.peak_tflops},
          {"peer", b.peer},           {"timing", options.graph ? "graph" : "stream"},
          {"sweep", options.sweep},   {"points", points_json(b)}};
}

// The default's time: measured beside a sweep's pick or a --config, else the point itself.
double default_us(const BenchPoint& p) { return p.default_us > 0 ? p.default_us : p.ours.median_us; }

void print_one(const BenchResult& b, bool graph) {
  std::printf("%s on %s (copy %.0f GB/s", b.spec.c_str(), b.device.c_str(), b.copy_gbps);
  if (b.peak_tflops > 0) std::printf(", cuBLAS fp16 %.0f TFLOP/s", b.peak_tflops);
  std::printf(", %s)\n", graph ? "launches replayed from a CUDA graph" : "back-to-back stream launches");
  // floor: the longer of the two ceilings as a time (bytes at the copy bandwidth, flops at the fp16 rate).
  std::printf("%6s %-34s %9s %9s %6s %8s %6s %9s", "m", "config", "us", "GB/s", "%copy", "TFLOP/s", "%peak",
              "floor us");
  if (!b.peer.empty()) std::printf(" %10s %8s %9s", (b.peer + " us").c_str(), "speedup", "err");
  std::printf(" %11s\n", "default us");
  for (const auto& p : b.points) {
    std::printf("%6lld %-34s %9.2f %9.0f %6.1f %8.2f %6.1f %9.2f", (long long)p.m, p.config.c_str(), p.ours.median_us,
                p.gbps, p.pct_copy, p.tflops, p.pct_peak, std::max(p.bandwidth_floor_us, p.flop_floor_us));
    if (!b.peer.empty()) std::printf(" %10.2f %8.2f %9.2e", p.peer_us, p.speedup_vs_peer, p.error_vs_peer);
    std::printf(" %11.2f\n", default_us(p));
  }
}

// --shapes: one row per point of every line, the default beside the timed (tuned, with
// --sweep) config and the peer where the family has one.
void print_shapes(const std::vector<BenchResult>& results, bool sweep, bool graph) {
  if (results.empty()) return;
  std::printf("%s (copy %.0f GB/s, %s)\n", results[0].device.c_str(), results[0].copy_gbps,
              graph ? "launches replayed from a CUDA graph" : "back-to-back stream launches");
  Table t({"spec", "m", "ctx", "default us", sweep ? "tuned us" : "us", "default/tuned", "peer", "peer us", "x peer",
           "%copy", "config"},
          {1, 2, 3, 4, 5, 7, 8, 9});
  for (const BenchResult& b : results) {
    for (const BenchPoint& p : b.points) {
      t.row({b.spec, std::to_string(p.m), b.context > 0 ? std::to_string(b.context) : "-",
             format("%.2f", default_us(p)), format("%.2f", p.ours.median_us),
             format("%.2f", default_us(p) / p.ours.median_us), b.peer.empty() ? "-" : b.peer,
             b.peer.empty() ? "-" : format("%.2f", p.peer_us), b.peer.empty() ? "-" : format("%.2f", p.speedup_vs_peer),
             format("%.1f", p.pct_copy), p.config});
    }
  }
  t.print();
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Time a kernel of any family on this GPU at several token counts against its ceilings and its peer");
  auto spec = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  auto ms = std::make_shared<std::string>("1,2,4,8,16,32,64,128,256,512,2048");
  auto shapes = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto sweep = std::make_shared<bool>(false);
  auto graph = std::make_shared<bool>(false);
  cmd->add_flag("--sweep", *sweep, "Time every candidate config for each M and report the fastest (with the default's time)");
  cmd->add_flag("--graph", *graph,
                "Time each batch of launches replayed from a CUDA graph (ours and the peer alike), without the stream's "
                "launch-to-launch gap");
  auto* spec_opt =
      cmd->add_option("spec", *spec, "Kernel spec, e.g. gemm:n=4096,k=4096,fmt=awq4 or attention:op=decode,...");
  auto* config_opt = cmd->add_option("--config", *config, "Config for every M (default: the family default per M)");
  auto* m_opt =
      cmd->add_option("--m", *ms, "Token counts (sequences for attention decode and verify), comma separated");
  auto* shapes_opt = cmd->add_option(
      "--shapes", *shapes,
      "A file of points instead of SPEC: one `SPEC M[,M…] [ctx=N]` per line (# comments; ctx: keys per sequence of an "
      "attention decode or verify), every point with its default beside (and with --sweep the tuned best); with "
      "--json one JSON object per line of the file as it finishes");
  shapes_opt->excludes(spec_opt)->excludes(config_opt)->excludes(m_opt);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([=] {
    BenchOptions options;
    options.sweep = *sweep;
    options.graph = *graph;
    if (!shapes->empty()) {
      const std::optional<std::string> text = try_read_file(*shapes);
      if (!text) throw InputError("--shapes: cannot read " + quoted_input(*shapes));
      const std::vector<BenchShape> lines = parse_bench_shapes(*text, *shapes);
      std::vector<BenchResult> results;
      Progress progress("bench", lines.size());
      for (const BenchShape& s : lines) {
        options.context = s.context;
        results.push_back(bench_spec(Session::get(), s.spec, s.ms, options));
        const BenchResult& b = results.back();
        // One JSON object per line of the file as it finishes, so a run cut short keeps its lines.
        if (*json) {
          std::cout << result_json(b, options).dump() << std::endl;
        }
        progress.tick();
      }
      progress.done();
      if (!*json) print_shapes(results, options.sweep, options.graph);
      return;
    }
    if (spec->empty()) throw InputError("bench needs a SPEC or --shapes FILE");
    options.config = *config;
    const std::vector<int64_t> counts = parse_token_counts(*ms, "--m");
    const BenchResult b = bench_spec(Session::get(), *spec, counts, options);
    if (*json) {
      std::cout << result_json(b, options).dump(2) << "\n";
      return;
    }
    print_one(b, options.graph);
  });
}

}  // namespace onecat::cli
