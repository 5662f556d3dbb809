#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "codegen/family.h"
#include "models/checkpoint/locate.h"
#include "models/config.h"
#include "models/plan.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/engine/session.h"
#include "runtime/jit/service.h"
#include "tools/onecat/commands.h"
#include "tuner/tuner.h"
#include "tuner/workload.h"

namespace onecat::cli {
namespace {

struct TuneArgs {
  std::string model;
  int tp = 1;
  std::string kv_cache_dtype = "auto";
  std::string buckets;
  std::string families;  // empty: every registered family
  double budget_s = 0;
  bool compile_only = false;
  std::string arch;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  bool json = false;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<int64_t> parse_buckets(const std::string& text) {
  if (text.empty()) return default_buckets();
  std::vector<int64_t> out;
  for (const auto& item : split(text)) {
    size_t used = 0;
    const long long v = leading_integer(item, used).value_or(0);
    if (used != item.size() || !is_bucket(v)) {
      throw InputError("--buckets: " + quoted_input(item) + " is not a bucket (powers of two from 1 to " + std::to_string(kMaxBucket) + ")");
    }
    out.push_back(v);
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void print_plan(const std::vector<models::PlannedOp>& plan, const std::set<std::string>& families) {
  Table table({"op", "family", "count", "spec"}, {2});
  for (const auto& op : plan) {
    const bool tuned = op.spec && families.count(op.family);
    table.row({op.name, op.family, std::to_string(op.count_per_rank),
               op.spec ? *op.spec + (tuned ? "" : "  (not selected)") : op.note});
  }
  table.print();
}

// A spec's buckets: those up to the most tokens it runs at in the plan (the fused decode gemms').
using SpecLimits = std::map<std::string, int64_t>;
std::vector<int64_t> spec_buckets(const SpecLimits& limits, const std::string& spec,
                                  const std::vector<int64_t>& buckets) {
  const auto it = limits.find(spec);
  if (it == limits.end() || it->second <= 0) return buckets;
  std::vector<int64_t> out;
  for (int64_t b : buckets) {
    if (b <= it->second) out.push_back(b);
  }
  return out;
}

void compile_only(const TuneArgs& a, Arch arch, const std::vector<std::string>& specs,
                  const std::vector<int64_t>& buckets, const SpecLimits& limits) {
  std::vector<CompileRequest> reqs;
  std::vector<std::string> bucket_of;
  for (const auto& spec : specs) {
    const Family& f = family_of(spec);
    std::vector<std::pair<std::string, std::string>> configs;  // config → buckets using it, in bucket order
    for (int64_t b : spec_buckets(limits, spec, buckets)) {
      // The family's own default, and strategy=cublas's kernel where a GPU with a usable cuBLAS
      // runs that untuned (default_config_here), since the target machine's cuBLAS is not known here.
      std::vector<std::string> untuned{f.default_config(spec, b, arch)};
      if (std::string cublas = untuned_cublas_config(f, spec, b); !cublas.empty()) untuned.push_back(cublas);
      for (const std::string& config : untuned) {
        auto it = std::find_if(configs.begin(), configs.end(), [&](const auto& c) { return c.first == config; });
        if (it == configs.end()) it = configs.insert(configs.end(), {config, ""});
        it->second += (it->second.empty() ? "" : ",") + std::to_string(b);
      }
    }
    for (const auto& [config, list] : configs) {
      reqs.push_back(CompileRequest::make(f, spec, config, arch));
      bucket_of.push_back(list);
    }
  }
  JitService& jit = Session::get().jit();
  Progress progress("compiling " + std::to_string(reqs.size()) + " default kernels for " + arch.name(), reqs.size());
  auto results = jit.get_all(reqs, a.jobs, Parallelism::kThreads, [&](size_t) { progress.tick(); });
  progress.done();
  int failures = 0;
  nlohmann::json out = nlohmann::json::array();
  Table table({"spec", "buckets", "config", "regs", "spill", "compile", "cache"}, {3, 4, 5});
  for (size_t i = 0; i < reqs.size(); ++i) {
    const CompileResult& r = results[i];
    if (!r.error.empty()) {
      ++failures;
      std::fprintf(stderr, "onecat: error: %s\n", r.error.c_str());
      out.push_back({{"spec", reqs[i].spec}, {"buckets", bucket_of[i]}, {"config", reqs[i].config}, {"error", r.error}});
      continue;
    }
    const auto& u = r.binary.usage;
    out.push_back({{"spec", reqs[i].spec}, {"buckets", bucket_of[i]}, {"config", reqs[i].config}, {"arch", arch.name()},
                   {"registers", u.registers}, {"spill_bytes", u.spill_store_bytes + u.spill_load_bytes},
                   {"compile_ms", r.binary.compile_ms}, {"cache_hit", r.cache_hit}});
    table.row({reqs[i].spec, bucket_of[i], reqs[i].config, std::to_string(u.registers),
               std::to_string(u.spill_store_bytes + u.spill_load_bytes),
               r.cache_hit ? "-" : format("%.0fms", r.binary.compile_ms), r.cache_hit ? "hit" : "miss"});
  }
  if (!a.json) table.print();
  if (a.json) std::cout << nlohmann::json{{"arch", arch.name()}, {"kernels", out}}.dump(2) << "\n";
  if (failures) throw Error(std::to_string(failures) + " of " + std::to_string(reqs.size()) + " kernels failed to compile");
}

void tune(const TuneArgs& a, const std::vector<std::string>& specs, const std::vector<int64_t>& buckets,
          const SpecLimits& limits) {
  Session& session = Session::get();
  session.use_gpu(0);  // the tuner measures on GPU 0
  const DeviceFingerprint device = session.device();
  struct Job {
    std::string spec;
    int64_t bucket;
  };
  std::vector<Job> todo;
  int already = 0;
  for (const auto& spec : specs) {
    for (int64_t b : spec_buckets(limits, spec, buckets)) {
      if (session.find_tuning(spec, b)) {
        ++already;
      } else {
        todo.push_back({spec, b});
      }
    }
  }
  if (!a.json) {
    std::printf("tuning %zu (spec, bucket) pairs on %s (%d already tuned, skipped)\n", todo.size(), device.name.c_str(),
                already);
  }
  const auto start = std::chrono::steady_clock::now();
  Progress progress("tuning", todo.size());
  std::vector<TuningRecord> done;
  std::vector<TunePhases> phases;
  std::vector<std::string> failures, skipped;
  for (const Job& job : todo) {
    if (a.budget_s > 0 && seconds_since(start) > a.budget_s) {
      skipped.push_back(job.spec + " M=" + std::to_string(job.bucket));
      continue;
    }
    try {
      TunePhases ph;
      done.push_back(session.tune_and_record(job.spec, job.bucket, /*retune=*/false,
                                             [&](const Family& f, const std::string& spec, int64_t bucket) {
                                               return tune_spec(f, spec, bucket, session.jit(), a.jobs, {}, &ph);
                                             }));
      phases.push_back(ph);
    } catch (const Error& e) {
      failures.push_back(job.spec + " M=" + std::to_string(job.bucket) + ": " + e.what());
    }
    progress.tick();
  }
  progress.done();
  release_workloads();
  nlohmann::json out = nlohmann::json::array();
  Table table({"spec", "M", "default us", "best us", "speedup", "config"}, {1, 2, 3, 4});
  for (size_t i = 0; i < done.size(); ++i) {
    const TuningRecord& r = done[i];
    const TunePhases& ph = phases[i];
    const double speedup = r.best_us > 0 ? r.default_us / r.best_us : 0;
    out.push_back({{"spec", r.spec}, {"bucket", r.bucket}, {"default_us", r.default_us}, {"best_us", r.best_us},
                   {"speedup", speedup}, {"config", r.config}, {"candidates", r.candidates.size()},
                   {"seconds", {{"compile", ph.compile}, {"inputs", ph.inputs}, {"check", ph.check}, {"timing", ph.timing}}}});
    table.row({r.spec, std::to_string(r.bucket), format("%.2f", r.default_us), format("%.2f", r.best_us),
               format("%.2f", speedup), r.config});
  }
  if (!a.json) table.print();
  if (a.json) {
    std::cout << nlohmann::json{{"device", device.name}, {"tuned", out}, {"already_tuned", already},
                                {"failures", failures}, {"skipped_for_budget", skipped}, {"seconds", seconds_since(start)}}
                     .dump(2)
              << "\n";
  }
  if (!skipped.empty()) std::fprintf(stderr, "onecat: %zu pairs left untuned by --budget-s; run again to continue\n", skipped.size());
  for (const auto& f : failures) std::fprintf(stderr, "onecat: tuning failed: %s\n", f.c_str());
  if (!failures.empty()) throw Error(std::to_string(failures.size()) + " tunings failed");
}

}  // namespace

void add_tune(CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "Tune every kernel of a model for this GPU, or prewarm the cache for another arch");
  auto a = std::make_shared<TuneArgs>();
  std::string builtins;
  for (const auto& name : models::builtin_model_names()) builtins += (builtins.empty() ? "" : ", ") + name;
  cmd->add_option("--model", a->model, "Hugging Face checkpoint dir, its config.json, or a built-in model: " + builtins)
      ->required();
  cmd->add_option("--tp", a->tp, "Tensor-parallel degree (1, 2, 4, 8)")->check(CLI::IsMember({1, 2, 4, 8}));
  cmd->add_option("--kv-cache-dtype", a->kv_cache_dtype,
                  "KV cache type of the attention kernels: auto (fp16), fp8 (= fp8_e4m3) or fp8_e5m2, per-tensor scale");
  cmd->add_option("--buckets", a->buckets,
                  "Buckets: tokens; sequences for attention decode/verify (default 1,2,4,...,512,2048)");
  cmd->add_option("--families", a->families, "Kernel families to tune, comma separated (default: every family)");
  cmd->add_option("--budget-s", a->budget_s, "Start no new tuning after this many seconds");
  cmd->add_flag("--compile-only", a->compile_only, "Compile every default config into the cache, no GPU needed");
  cmd->add_option("--arch", a->arch, "Target arch for --compile-only (default: this GPU)");
  cmd->add_option("--jobs,-j", a->jobs, "Kernels compiled at once")->check(CLI::Range(1, 1024));
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] {
    if (!a->arch.empty() && !a->compile_only) throw InputError("--arch goes with --compile-only (tuning runs on this GPU)");
    const models::ModelConfig model = models::load_model(models::locate_checkpoint(a->model));
    const models::KvCacheDtype kv = models::parse_kv_cache_dtype(a->kv_cache_dtype);
    std::set<std::string> families;
    for (const auto& f : split(a->families)) {
      if (!find_family(f)) {
        throw InputError("--families: " + quoted_input(f) + " is not a kernel family (known: " + family_names() + ")");
      }
      families.insert(f);
    }
    if (families.empty()) {
      for (const Family* f : all_families()) families.insert(std::string(f->name()));
    }
    const std::vector<int64_t> buckets = parse_buckets(a->buckets);
    // Without a GPU, fail before printing the plan, saying what to do.
    if (const std::string why = Driver::unavailable_reason(); !a->compile_only && !why.empty()) {
      throw Error(why + "; tuning needs an NVIDIA GPU, and without one --compile-only --arch sm_70 fills the cache with "
                        "the default kernels");
    }
    // The target's arch decides how many tokens a decode step fuses its norms at, so which fused
    // gemms (and buckets) the forward there runs.
    const Arch arch = a->compile_only ? resolve_arch(a->arch.empty() ? "native" : a->arch)
                                      : (Session::get().use_gpu(0), Session::get().arch());
    const std::vector<models::PlannedOp> plan =
        models::plan_model(model, a->tp, kv, models::gpu_fused_norm_max_tokens(arch));
    std::vector<std::string> specs;
    SpecLimits limits;
    for (const auto& spec : models::unique_specs(plan)) {
      if (families.count(std::string(family_of(spec).name()))) specs.push_back(spec);
      limits[spec] = models::spec_max_tokens(plan, spec);
    }
    if (!a->json) {
      std::printf("model %s, tp %d: %zu ops, %zu kernel specs to %s\n", model.name.c_str(), a->tp, plan.size(), specs.size(),
                  a->compile_only ? "compile" : "tune");
      print_plan(plan, families);
      std::printf("\n");
    }
    if (a->compile_only) {
      compile_only(*a, arch, specs, buckets, limits);
    } else {
      tune(*a, specs, buckets, limits);
    }
  });
}

}  // namespace onecat::cli
