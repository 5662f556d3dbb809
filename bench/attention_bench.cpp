// Attention benchmark on the GPU (issue 6): prefill TFLOP/s (causal work only), decode and
// verify KV bytes per second against the measured copy bandwidth: the default config, or with
// `best` the fastest of every candidate config at each point (as a tune would find it).
// Inputs are random; decode rotates through copies of the paged cache that exceed the L2
// three times. Writes one JSON object to the file named by the first argument; the torch
// SDPA peer (bench/attention_sdpa.py) runs in the same device call.
//   attention_bench OUT.json [quick|sweep|best]
//   quick: contexts of 8K only; sweep: first every candidate at four points, then the default
//   at every point; best: every candidate at every point (the default's time is kept beside
//   the best).
//   attention_bench OUT.json one SPEC BATCH CTX Q [CONFIG]: one point, default config or CONFIG
//   (what bench/ncu_profile.sh runs under the profiler).
//   attention_bench OUT.json points FILE: one point per line of FILE (SPEC BATCH CTX Q [CONFIG];
//   # comments), every kernel compiled up front into the kernel cache (ONECAT_CACHE_DIR), so
//   a run's time goes to measuring (bench/before_after.sh runs two builds on one file).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/half.h"
#include "cache/paths.h"
#include "cache/store.h"
#include "codegen/attention/emit.h"
#include "codegen/attention/op.h"
#include "codegen/family.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/measure.h"
#include "tuner/random_weight.h"
#include "tuner/workload.h"

using namespace onecat;

namespace {

// Random fp16 values of magnitude below 2 (exponent field ≤ 14: never inf or NaN), or the
// fp8 code 0x38 everywhere; random bits (fill_random_chunks), since caches of several GB are
// filled here.
DeviceBuffer random_buffer(size_t bytes, std::mt19937_64& rng, bool fp8) {
  std::vector<uint16_t> h((bytes + 1) / 2);
  fill_random_chunks(rng, h.size(), [&](size_t begin, size_t end, SplitMix64& r) {
    for (size_t i = begin; i < end; ++i) h[i] = fp8 ? uint16_t(0x3838) : uint16_t(r.next() & 0xBBFF);
  });
  DeviceBuffer b(bytes);
  b.upload(h.data(), bytes);
  return b;
}

struct Run {
  double us = 0;
  std::string config;
  double default_us = 0;  // with every candidate timed: the default config's time
};

bool g_every_candidate = false;  // `best`: each point times every candidate config

// Times spec (attention op) on `batch` sequences of `ctx` keys and `q` queries each.
Run time_attention(JitService& jit, const std::string& spec_text, int batch, int ctx, int q, std::mt19937_64& rng,
                   int l2, std::vector<std::string> configs = {}) {
  const attention::Spec s = attention::Spec::parse(spec_text);
  const Family& f = family_of(spec_text);
  const int64_t m = s.op == attention::Op::kPrefill ? int64_t(batch) * q : batch;
  const Arch arch{Driver::find()->device_info(0).sm};
  const std::string def = f.default_config(spec_text, m, arch);
  const bool screen = configs.empty() && g_every_candidate;
  if (configs.empty()) configs.push_back(def);
  if (screen) {
    for (const auto& c : f.candidate_configs(spec_text, arch)) {
      if (c != def && f.fits_bucket(spec_text, c, m)) configs.push_back(c);
    }
  }
  std::vector<CompileRequest> reqs;
  for (const auto& cfg : configs) reqs.push_back(CompileRequest::make(f, spec_text, cfg, arch));
  const auto compiled = jit.get_all(reqs, 16, Parallelism::kThreads);
  const int pages_per_seq = (ctx + s.page - 1) / s.page;
  const size_t page_bytes = size_t(s.kv_heads) * s.page * s.dim * s.kv_bytes();
  const size_t need = size_t(batch) * pages_per_seq * page_bytes;
  const int copies = rotation_copies(2 * need, l2);
  const int64_t pages = int64_t(copies) * batch * pages_per_seq;
  DeviceBuffer kc = random_buffer(size_t(pages) * page_bytes, rng, s.kv != attention::KvType::kF16);
  DeviceBuffer vc = random_buffer(size_t(pages) * page_bytes, rng, s.kv != attention::KvType::kF16);
  std::vector<int> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  DeviceBuffer tab(table.size() * 4);
  tab.upload(table.data(), table.size() * 4);
  std::vector<int> lens(size_t(batch), ctx), cu(size_t(batch) + 1);
  for (int b = 0; b <= batch; ++b) cu[size_t(b)] = b * q;
  DeviceBuffer dlen(lens.size() * 4), dcu(cu.size() * 4);
  dlen.upload(lens.data(), lens.size() * 4), dcu.upload(cu.data(), cu.size() * 4);
  const size_t qbytes = size_t(batch) * q * s.heads * s.dim * 2;
  DeviceBuffer dq = random_buffer(qbytes, rng, false), dout(qbytes);
  std::vector<float> scales(size_t(s.kv_heads), 1.f);
  DeviceBuffer dsc(scales.size() * 4);
  dsc.upload(scales.data(), scales.size() * 4);
  MeasureOptions full;
  if (s.op == attention::Op::kPrefill) full.warmup = 2, full.batch = 3, full.min_batches = 3, full.min_total_ms = 30;
  // Screening (every candidate): a few short batches each; the fastest few then in full.
  const MeasureOptions brief{2, 3, 3, 5, 10};
  auto time_config = [&](size_t ci, const MeasureOptions& opt) {
    const LoadedKernel& k = ModuleTable::get().load(compiled[ci].binary);
    const attention::Config c = attention::Config::parse(s, configs[ci]);
    const int64_t wf = attention::workspace_floats(s, c, batch), wc = attention::workspace_counters(s, c, batch);
    DeviceBuffer part(size_t(std::max<int64_t>(wf, 1)) * 4), cnt(size_t(std::max<int64_t>(wc, 1)) * 4);
    cnt.fill_bytes(0);
    attention::Args a;
    a.out = dout.ptr(), a.q = dq.ptr(), a.k_cache = kc.ptr(), a.v_cache = vc.ptr(), a.k_scale = dsc.ptr();
    a.v_scale = dsc.ptr(), a.max_pages = int(pages_per_seq), a.seq_lens = dlen.ptr(), a.cu_q = dcu.ptr();
    a.sm_scale = 1.f / std::sqrt(float(s.dim)), a.partial = wf ? part.ptr() : 0, a.counters = wc ? cnt.ptr() : 0;
    a.batch = batch, a.max_q = q;
    return measure(
               [&](int i) {
                 a.block_table = tab.ptr() + CUdeviceptr(size_t(i % copies) * batch * pages_per_seq * 4);
                 launch(k, attention::make_call(s, c, a), nullptr);
               },
               opt)
        .median_us;
  };
  std::vector<std::pair<double, size_t>> timed;  // (µs, config index)
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    if (!compiled[ci].error.empty()) continue;
    const double us = time_config(ci, screen ? brief : full);
    if (configs.size() > 1 && !screen) std::printf("  sweep %s: %.1f us\n", configs[ci].c_str(), us);
    timed.push_back({us, ci});
  }
  if (timed.empty()) throw Error("no config of " + spec_text + " compiled");
  std::sort(timed.begin(), timed.end());
  if (screen) {  // the fastest three and the default again, in full
    std::vector<std::pair<double, size_t>> again;
    for (size_t i = 0; i < timed.size(); ++i) {
      if (i < 3 || configs[timed[i].second] == def) again.push_back({time_config(timed[i].second, full), timed[i].second});
    }
    timed = again;
    std::sort(timed.begin(), timed.end());
  }
  Run best{timed.front().first, configs[timed.front().second]};
  for (const auto& [us, ci] : timed) {
    if (configs[ci] == def) best.default_us = us;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "attention_bench.json";
  const bool quick = argc > 2 && std::string(argv[2]) == "quick";
  const bool sweep = argc > 2 && std::string(argv[2]) == "sweep";
  g_every_candidate = argc > 2 && std::string(argv[2]) == "best";
  disable_cuda_compute_cache();
  use_device(0);
  JitService jit(nullptr);
  const DeviceInfo dev = Driver::find()->device_info(0);
  std::mt19937_64 rng(1);
  nlohmann::json res{{"device", dev.name}, {"copy_gbps", measure_copy_bandwidth() / 1e9}};
  std::printf("device %s, copy %.0f GB/s\n", dev.name.c_str(), res["copy_gbps"].get<double>());
  const double copy = res["copy_gbps"].get<double>();
  auto save = [&] { std::ofstream(out_path) << res.dump(1) << "\n"; };  // after every point: a timeout keeps the rest

  if (argc > 2 && std::string(argv[2]) == "one") {  // one SPEC BATCH CTX Q [CONFIG]: one point (profiling)
    if (argc < 7) throw Error("usage: attention_bench OUT.json one SPEC BATCH CTX Q [CONFIG]");
    std::vector<std::string> cfg;
    if (argc > 7) cfg.push_back(argv[7]);
    const Run r = time_attention(jit, argv[3], std::stoi(argv[4]), std::stoi(argv[5]), std::stoi(argv[6]), rng, dev.l2_bytes, cfg);
    std::printf("%s batch=%s ctx=%s q=%s: %.1f us [%s]\n", argv[3], argv[4], argv[5], argv[6], r.us, r.config.c_str());
    res["one"] = {{"spec", argv[3]}, {"us", r.us}, {"config", r.config}};
    save();
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "points") {  // points FILE: one point per line
    if (argc < 4) throw Error("usage: attention_bench OUT.json points FILE");
    struct Point {
      std::string spec;
      int batch = 0, ctx = 0, q = 0;
      std::string config;  // empty: the default
    };
    std::vector<Point> points;
    std::ifstream in(argv[3]);
    if (!in) throw InputError(std::string("cannot read the points file ") + argv[3]);
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      Point p;
      if (!(ls >> p.spec) || p.spec[0] == '#') continue;
      if (!(ls >> p.batch >> p.ctx >> p.q)) {
        throw InputError("points file line " + quoted_input(line) + " is not SPEC BATCH CTX Q [CONFIG]");
      }
      ls >> p.config;
      points.push_back(p);
    }
    // Compile every kernel at once into the cache; time_attention then finds each there.
    Store store(cache_file());
    JitService cached(&store);
    const Arch arch{dev.sm};
    std::vector<CompileRequest> reqs;
    for (const Point& p : points) {
      const Family& f = family_of(p.spec);
      const bool prefill = attention::Spec::parse(p.spec).op == attention::Op::kPrefill;
      const int64_t m = prefill ? int64_t(p.batch) * p.q : p.batch;  // as time_attention buckets it
      const std::string cfg = p.config.empty() ? f.default_config(p.spec, m, arch) : p.config;
      reqs.push_back(CompileRequest::make(f, p.spec, cfg, arch));
    }
    for (const auto& r : cached.get_all(reqs, 16, Parallelism::kThreads)) {
      if (!r.error.empty()) throw Error(r.error);
    }
    res["points"] = nlohmann::json::array();
    for (const Point& p : points) {
      std::vector<std::string> cfg;
      if (!p.config.empty()) cfg.push_back(p.config);
      const Run r = time_attention(cached, p.spec, p.batch, p.ctx, p.q, rng, dev.l2_bytes, cfg);
      std::printf("%s batch=%d ctx=%d q=%d: %.1f us [%s]\n", p.spec.c_str(), p.batch, p.ctx, p.q, r.us,
                  r.config.c_str());
      std::fflush(stdout);
      res["points"].push_back(
          {{"spec", p.spec}, {"batch", p.batch}, {"ctx", p.ctx}, {"q", p.q}, {"config", r.config}, {"us", r.us}});
      save();
    }
    return 0;
  }
  if (sweep) {  // every candidate config at a few points: data for the defaults
    for (auto [spec, batch, ctx, q] : std::vector<std::tuple<std::string, int, int, int>>{
             {"attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16", 8, 8192, 1},
             {"attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16", 32, 8192, 1},
             {"attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3", 8, 8192, 1},
             {"attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16", 1, 4096, 4096}}) {
      std::printf("sweep %s batch=%d ctx=%d\n", spec.c_str(), batch, ctx);
      Run r = time_attention(jit, spec, batch, ctx, q, rng, dev.l2_bytes, family_of(spec).candidate_configs(spec, Arch{dev.sm}));
      res["sweep"].push_back({{"spec", spec}, {"batch", batch}, {"ctx", ctx}, {"best_us", r.us}, {"best", r.config}});
      std::fflush(stdout);
      save();
    }
  }
  struct Geo {
    int heads, kv, dim;
  };
  for (Geo g : {Geo{32, 8, 128}, Geo{24, 4, 256}}) {
    for (int seq : {4096, 16384}) {
      const std::string spec = "attention:op=prefill,heads=" + std::to_string(g.heads) + ",kv_heads=" + std::to_string(g.kv) +
                               ",dim=" + std::to_string(g.dim) + ",page=16,kv=f16";
      Run r = time_attention(jit, spec, 1, seq, seq, rng, dev.l2_bytes);
      const double flop = 4.0 * g.heads * g.dim * (double(seq) * (seq + 1) / 2);
      res["prefill"].push_back({{"heads", g.heads}, {"kv_heads", g.kv}, {"dim", g.dim}, {"seq", seq}, {"us", r.us},
                                {"tflops", flop / r.us / 1e6}, {"config", r.config}, {"default_us", r.default_us}});
      std::printf("prefill H=%d/%d D=%d S=%d: %.1f us, %.1f TFLOP/s [%s]\n", g.heads, g.kv, g.dim, seq, r.us,
                  flop / r.us / 1e6, r.config.c_str());
      std::fflush(stdout);
      save();
    }
  }
  for (const char* kv : {"f16", "e4m3"}) {
    for (int batch : {1, 8, 32}) {
      for (int ctx : quick ? std::vector<int>{8192} : std::vector<int>{1024, 8192, 32768}) {
        for (int q : {1, 8}) {
          if (q == 8 && std::string(kv) != "f16") continue;
          const std::string spec = std::string("attention:op=") + (q == 1 ? "decode" : "verify,q=8") +
                                   ",heads=32,kv_heads=8,dim=128,page=16,kv=" + kv;
          Run r = time_attention(jit, spec, batch, ctx, q, rng, dev.l2_bytes);
          const double bytes = double(batch) * ctx * 8 * 128 * 2 * (std::string(kv) == "f16" ? 2 : 1);
          const double gbps = bytes / r.us / 1e3;
          res[q == 1 ? "decode" : "verify"].push_back({{"kv", kv}, {"batch", batch}, {"ctx", ctx}, {"us", r.us},
                                                       {"kv_gbps", gbps}, {"of_copy", gbps / copy}, {"config", r.config},
                                                       {"default_us", r.default_us}});
          std::printf("%s kv=%s batch=%d ctx=%d: %.1f us, %.0f GB/s (%.0f%% of copy) [%s]\n", q == 1 ? "decode" : "verify8",
                      kv, batch, ctx, r.us, gbps, 100 * gbps / copy, r.config.c_str());
          std::fflush(stdout);
          save();
        }
      }
    }
  }
  save();
  return 0;
}
