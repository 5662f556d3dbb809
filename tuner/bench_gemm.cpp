#include "tuner/bench_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "base/error.h"
#include "base/half.h"
#include "codegen/family.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/space.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/gemm_rig.h"
#include "tuner/tuner.h"
#include "tuner/workload.h"

namespace onecat {

GemmBench bench_gemm(const std::string& spec_text, const std::vector<int64_t>& ms, const GemmBenchOptions& options,
                     Store* store) {
  Driver& d = Driver::require_gpu();
  use_device(0);
  const DeviceInfo info = d.device_info(0);
  const Arch arch{info.sm};
  const Family& family = family_of(spec_text);
  const gemm::Spec spec = gemm::Spec::parse(spec_text);
  GemmBench out;
  out.spec = spec.to_string();
  out.device = info.name;
  out.copy_gbps = measure_copy_bandwidth() / 1e9;

  GemmRig rig(spec, std::random_device{}() | 1, GemmRig::kRotate);
  // The peer: cuBLAS fp16 on the dequantised weights (plain product only).
  const bool peer = spec.epilogue == gemm::Epilogue::kNone && !spec.out_f32 && !spec.act_order;
  if (peer) Cublas::require();

  JitService jit(store);
  using Run = std::function<void(int, CUstream)>;
  auto timed = [&](const Run& run, const MeasureOptions& o = {}) {
    return options.graph ? measure_graph(run, o) : measure([&](int i) { run(i, nullptr); }, o);
  };
  for (int64_t m : ms) {
    rig.prepare(m);
    GemmBenchPoint pt;
    pt.m = m;
    pt.default_config = family.default_config(out.spec, m, arch);
    pt.config = family.canonical_config(out.spec, options.config.empty() ? pt.default_config : options.config);
    auto runner = [&](const std::string& config_text) {
      const gemm::Config config = gemm::Config::parse(spec, config_text);
      const LoadedKernel* kernel =
          &ModuleTable::get().load(jit.get(CompileRequest::make(family, out.spec, config_text, arch)).binary);
      return Run([&rig, kernel, config](int i, CUstream s) { rig.launch(*kernel, config, i, s); });
    };
    if (options.sweep) {
      // Candidates whose token tile fits the bucket: compile them all at once, time each briefly.
      std::vector<CompileRequest> reqs;
      for (const auto& c : tuning_candidates(family, out.spec, m, arch)) reqs.push_back(CompileRequest::make(family, out.spec, c, arch));
      const std::vector<CompileResult> built = jit.get_all(reqs, options.jobs, Parallelism::kThreads);
      const MeasureOptions quick{3, 10, 3, 10, 50};
      double best = INFINITY;
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (!built[i].error.empty() || built[i].binary.usage.spills()) continue;
        const double us = timed(runner(reqs[i].config), quick).median_us;
        pt.swept.emplace_back(reqs[i].config, us);
        if (us < best) best = us, pt.config = reqs[i].config;
      }
      pt.candidates = int(reqs.size());
    }
    // The default beside a sweep's pick or a --config.
    if (options.sweep || pt.config != pt.default_config) pt.default_us = timed(runner(pt.default_config)).median_us;
    pt.ours = timed(runner(pt.config));
    pt.weight_bytes = double(rig.weight().bytes());
    pt.weight_gbps = pt.weight_bytes / (pt.ours.median_us * 1e-6) / 1e9;
    pt.pct_copy = 100.0 * pt.weight_gbps / out.copy_gbps;
    pt.tflops = 2.0 * double(m) * double(spec.n) * double(spec.k) / (pt.ours.median_us * 1e-6) / 1e12;
    const gemm::Config chosen = gemm::Config::parse(spec, pt.config);
    const LoadedKernel& kernel = ModuleTable::get().load(jit.get(CompileRequest::make(family, out.spec, pt.config, arch)).binary);
    const CheckResult check = rig.check(kernel, chosen);
    if (!check.passed) {
      throw Error(out.spec + " [" + pt.config + "] at M=" + std::to_string(m) + " is wrong: error " +
                  std::to_string(check.error) + " > " + std::to_string(check.tolerance) + " " + check.detail);
    }
    pt.error_vs_reference = check.error;
    if (peer) {
      pt.cublas_us = timed([&](int i, CUstream s) { rig.launch_cublas(i, s); }).median_us;
      pt.speedup_vs_cublas = pt.cublas_us / pt.ours.median_us;
      pt.error_vs_cublas = rig.error_vs_cublas(kernel, chosen);
    }
    out.points.push_back(pt);
  }
  return out;
}

}  // namespace onecat
