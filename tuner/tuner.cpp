#include "tuner/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/engine/session.h"
#include "runtime/jit/module_table.h"
#include "tuner/measure.h"
#include "tuner/verify.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

// First round: every candidate briefly; those within kRefineBand of the fastest go on to a
// full timing (MeasureOptions defaults).
constexpr MeasureOptions kScreen{3, 10, 3, 10, 50};
constexpr double kRefineBand = 1.15;

}  // namespace

int64_t bucket_for(int64_t m) {
  if (m < 1) throw InputError("token count must be at least 1 (got " + std::to_string(m) + ")");
  return int64_t(1) << bucket_index(m);
}

std::vector<int64_t> default_buckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 2048}; }

DeviceFingerprint this_device() { return device_fingerprint(0); }

std::vector<std::string> tuning_candidates(const Family& family, const std::string& spec, int64_t m, Arch arch) {
  const std::string def = default_config_here(family, spec, m, arch.sm);
  std::vector<std::string> out{def};
  // Where the default here is cuBLAS, onecat's own default is timed too, whatever fits_bucket says.
  if (const std::string own = family.default_config(spec, m, arch); own != def) out.push_back(own);
  for (const auto& c : family.candidate_configs(spec, arch)) {
    if (std::find(out.begin(), out.end(), c) == out.end() && family.fits_bucket(spec, c, m)) out.push_back(c);
  }
  return out;
}

int choose_config(const std::vector<CandidateTiming>& t, const std::string& default_config, double noise) {
  int fastest = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].status == "ok" && (fastest < 0 || t[i].median_us < t[fastest].median_us)) fastest = int(i);
  }
  if (fastest < 0) return -1;
  const double best = t[fastest].median_us;
  const double band = best * (1 + noise);
  int chosen = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].status != "ok" || t[i].median_us > band) continue;
    if (t[i].config == default_config) return int(i);
    if (chosen < 0) chosen = int(i);
  }
  return chosen;
}

TuningRecord tune_spec(const Family& family, const std::string& spec_text, int64_t bucket, JitService& jit, int jobs,
                       const TuneHooks& hooks, TunePhases* phases) {
  TunePhases local;
  TunePhases& ph = phases ? *phases : local;
  ph = {};
  auto clock = std::chrono::steady_clock::now();
  auto lap = [&clock](double& into) {  // adds the time since the last lap to `into`
    const auto now = std::chrono::steady_clock::now();
    into += std::chrono::duration<double>(now - clock).count();
    clock = now;
  };
  use_device(0);
  TuningRecord rec;
  rec.device = this_device();
  rec.family = std::string(family.name());
  rec.generator_version = family.generator_version();
  rec.spec = family.canonical_spec(spec_text);
  rec.bucket = bucket;
  const Arch arch{rec.device.sm};
  rec.default_config = default_config_here(family, rec.spec, bucket, arch.sm);

  const std::vector<std::string> configs = tuning_candidates(family, rec.spec, bucket, arch);
  std::vector<CompileRequest> reqs;
  for (const auto& c : configs) reqs.push_back(CompileRequest::make(family, rec.spec, c, arch));
  const std::vector<CompileResult> compiled = jit.get_all(reqs, jobs, Parallelism::kThreads);
  lap(ph.compile);

  std::unique_ptr<Workload> workload = make_workload(family, rec.spec, bucket);
  lap(ph.inputs);
  for (size_t i = 0; i < configs.size(); ++i) {
    CandidateTiming t;
    t.config = configs[i];
    const CompileResult& c = compiled[i];
    if (!c.error.empty()) {
      t.status = "compile_error", t.detail = c.error.substr(0, 500);
    } else if (c.binary.usage.spills()) {
      t.status = "spills";
      t.detail = std::to_string(c.binary.usage.spill_store_bytes) + " bytes of spill stores";
    } else if (std::string why = workload->unavailable(t.config); !why.empty()) {
      t.status = "unavailable", t.detail = why.substr(0, 500);
    } else {
      const LoadedKernel& kernel = ModuleTable::get().load(c.binary);
      // A sabotaged candidate is checked with another config's kernel: its output is wrong.
      const LoadedKernel* checked = &kernel;
      if (hooks.sabotage && hooks.sabotage(t.config)) {
        for (size_t j = 0; j < configs.size(); ++j) {
          if (j != i && compiled[j].error.empty() && !compiled[j].binary.usage.spills()) {
            checked = &ModuleTable::get().load(compiled[j].binary);
            break;
          }
        }
        if (checked == &kernel) throw Error("cannot sabotage the only candidate");
      }
      CheckResult check;
      lap(ph.timing);  // loading and anything before: counted with the timings
      try {
        check = workload->check(*checked, t.config);
      } catch (const Error& e) {
        check.detail = e.what();
      }
      lap(ph.check);
      if (!check.passed) {
        t.status = "wrong";
        t.detail = "error " + std::to_string(check.error) + " > " + std::to_string(check.tolerance) + " " + check.detail;
      } else {
        const Timing tm = measure([&](int k) { workload->launch(kernel, t.config, k); }, kScreen);
        t.status = "ok", t.median_us = tm.median_us, t.min_us = tm.min_us, t.max_us = tm.max_us;
      }
    }
    rec.candidates.push_back(t);
  }
  // Second round: the default and every candidate the screen put near the fastest are timed
  // again in full; their full timings are the ones recorded and compared.
  double screened_best = INFINITY;
  for (const auto& t : rec.candidates) {
    if (t.status == "ok") screened_best = std::min(screened_best, t.median_us);
  }
  for (size_t i = 0; i < rec.candidates.size(); ++i) {
    CandidateTiming& t = rec.candidates[i];
    if (t.status != "ok") continue;
    if (t.config != rec.default_config && t.median_us > kRefineBand * screened_best) {
      t.status = "screened";  // not a contender: its brief timing stays on record
      t.detail = "brief timing only, " + std::to_string(int(std::lround(100 * (t.median_us / screened_best - 1)))) +
                 "% slower than the fastest";
      continue;
    }
    const LoadedKernel& kernel = ModuleTable::get().load(compiled[i].binary);
    const Timing tm = measure([&](int k) { workload->launch(kernel, t.config, k); });
    t.median_us = tm.median_us, t.min_us = tm.min_us, t.max_us = tm.max_us;
  }
  lap(ph.timing);
  const int chosen = choose_config(rec.candidates, rec.default_config);
  if (chosen < 0) throw Error("no candidate of " + rec.spec + " at M=" + std::to_string(bucket) + " compiled, passed and ran");
  rec.config = rec.candidates[chosen].config;
  rec.best_us = rec.candidates[chosen].median_us;
  for (const auto& t : rec.candidates) {
    if (t.config == rec.default_config) rec.default_us = t.median_us;
  }
  return rec;
}

}  // namespace onecat
