#include "tuner/bench.h"

#include <cmath>
#include <functional>
#include <random>
#include <sstream>

#include "base/error.h"
#include "codegen/attention/spec.h"
#include "codegen/family.h"
#include "codegen/gemm/spec.h"
#include "runtime/cuda/cublas.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/jit/module_table.h"
#include "tuner/gemm_rig.h"
#include "tuner/tuner.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

// The fp16 rate (tensor cores, fp32 accumulation) cuBLAS reaches on an 8192³ product, in
// TFLOP/s: the FLOP ceiling a kernel's flops are set against. 0 without cuBLAS.
double measure_fp16_peak_tflops() {
  if (!Cublas::find()) return 0;
  constexpr int64_t n = 8192;
  GemmRig rig(gemm::Spec::parse("gemm:n=8192,k=8192,fmt=f16"), 1, 1);
  rig.prepare(n);
  const Timing t = measure([&](int) { rig.launch_cublas(0); }, {2, 2, 5, 50, 20});
  return 2.0 * double(n) * double(n) * double(n) / (t.median_us * 1e-6) / 1e12;
}

}  // namespace

std::vector<int64_t> parse_token_counts(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1 || v > (1 << 20)) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(what + ": " + quoted_input(item) + " is not a token count (write e.g. 1,2,4,16)");
    }
  }
  if (out.empty()) throw InputError(what + " needs at least one token count");
  return out;
}

std::vector<BenchShape> parse_bench_shapes(const std::string& text, const std::string& where) {
  std::vector<BenchShape> out;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    const std::string at = where + " line " + std::to_string(number);
    if (f.size() < 2 || f.size() > 3) {
      throw InputError(at + ": expected `SPEC M[,M…] [ctx=N]`, found " + std::to_string(f.size()) + " fields");
    }
    BenchShape shape;
    shape.line = number;
    try {
      shape.spec = family_of(f[0]).canonical_spec(f[0]);
      shape.ms = parse_token_counts(f[1], "the token counts");
      if (f.size() == 3) {
        if (f[2].rfind("ctx=", 0) != 0) throw InputError("the third field must be ctx=N, not " + quoted_input(f[2]));
        shape.context = parse_token_counts(f[2].substr(4), "ctx").at(0);
        if (f[2].find(',') != std::string::npos) throw InputError("ctx takes one key count, not a list");
        const bool attention = family_of(shape.spec).name() == "attention";
        const attention::Op op = attention ? attention::Spec::parse(shape.spec).op : attention::Op::kPrefill;
        if (op != attention::Op::kDecode && op != attention::Op::kVerify) {
          throw InputError("ctx applies to attention decode and verify only");
        }
      }
    } catch (const InputError& e) {
      throw InputError(at + ": " + e.what());
    }
    out.push_back(std::move(shape));
  }
  if (out.empty()) throw InputError(where + " lists no shape (lines `SPEC M[,M…] [ctx=N]`)");
  return out;
}

BenchResult bench_spec(Session& session, const std::string& spec_text, const std::vector<int64_t>& ms,
                       const BenchOptions& options) {
  const Family& family = family_of(spec_text);  // bad input is reported before any driver call
  BenchResult out;
  out.spec = family.canonical_spec(spec_text);
  out.context = options.context;
  if (!options.config.empty()) family.canonical_config(out.spec, options.config);
  session.use_gpu(0);
  const Arch arch = session.arch();
  out.family = std::string(family.name());
  out.device = session.device().name;
  out.copy_gbps = measure_copy_bandwidth() / 1e9;

  JitService& jit = session.jit();
  auto kernel_of = [&](const std::string& config) -> const LoadedKernel& {
    return ModuleTable::get().load(jit.get(CompileRequest::make(family, out.spec, config, arch)).binary);
  };
  using Run = std::function<void(int, CUstream)>;
  auto timed = [&](const Run& run, const MeasureOptions& o = {}) {
    return options.graph ? measure_graph(run, o) : measure([&](int i) { run(i, nullptr); }, o);
  };
  const uint64_t seed = std::random_device{}() | 1;
  bool peak_measured = false;
  for (int64_t m : ms) {
    const std::unique_ptr<Workload> workload = make_workload(family, out.spec, m, seed, options.context);
    BenchPoint pt;
    pt.m = m;
    pt.default_config = default_config_here(family, out.spec, m, arch.sm);
    pt.config = family.canonical_config(out.spec, options.config.empty() ? pt.default_config : options.config);
    auto runner = [&](const std::string& config) {
      const LoadedKernel* kernel = &kernel_of(config);
      return Run([&workload, kernel, config](int i, CUstream s) { workload->launch(*kernel, config, i, s); });
    };
    if (options.sweep) {
      // Candidates that fit the bucket: compile them all at once, time each briefly.
      std::vector<CompileRequest> reqs;
      for (const auto& c : tuning_candidates(family, out.spec, m, arch)) {
        reqs.push_back(CompileRequest::make(family, out.spec, c, arch));
      }
      const std::vector<CompileResult> built = jit.get_all(reqs, options.jobs, Parallelism::kThreads);
      const MeasureOptions quick{3, 10, 3, 10, 50};
      double best = INFINITY;
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (!built[i].error.empty() || built[i].binary.usage.spills() ||
            !workload->unavailable(reqs[i].config).empty()) {
          continue;
        }
        const double us = timed(runner(reqs[i].config), quick).median_us;
        pt.swept.emplace_back(reqs[i].config, us);
        if (us < best) best = us, pt.config = reqs[i].config;
      }
      pt.candidates = int(reqs.size());
    }
    // The default beside a sweep's pick or a --config.
    if (options.sweep || pt.config != pt.default_config) pt.default_us = timed(runner(pt.default_config)).median_us;
    pt.ours = timed(runner(pt.config));
    const LoadedKernel& kernel = kernel_of(pt.config);
    const CheckResult check = workload->check(kernel, pt.config);
    if (!check.passed) {
      throw Error(out.spec + " [" + pt.config + "] at m=" + std::to_string(m) + " is wrong: error " +
                  std::to_string(check.error) + " > " + std::to_string(check.tolerance) + " " + check.detail);
    }
    pt.error_vs_reference = check.error;

    const Traffic traffic = workload->traffic();
    const double seconds = pt.ours.median_us * 1e-6;
    pt.bytes = traffic.bytes;
    pt.gbps = traffic.bytes / seconds / 1e9;
    pt.pct_copy = 100.0 * pt.gbps / out.copy_gbps;
    pt.bandwidth_floor_us = traffic.bytes / (out.copy_gbps * 1e9) * 1e6;
    pt.flops = traffic.flops;
    if (traffic.flops > 0) {
      if (!peak_measured) out.peak_tflops = measure_fp16_peak_tflops(), peak_measured = true;
      pt.tflops = traffic.flops / seconds / 1e12;
      if (out.peak_tflops > 0) {
        pt.pct_peak = 100.0 * pt.tflops / out.peak_tflops;
        pt.flop_floor_us = traffic.flops / (out.peak_tflops * 1e12) * 1e6;
      }
    }
    workload->use_own_kernels([&](const std::string& spec) {
      const Family& f = family_of(spec);
      const std::string canonical = f.canonical_spec(spec);
      Workload::OwnKernel k;
      k.config = default_config_here(f, canonical, m, arch.sm);
      k.kernel = &ModuleTable::get().load(jit.get(CompileRequest::make(f, canonical, k.config, arch)).binary);
      return k;
    });
    out.peer = workload->peer_name();
    if (!out.peer.empty()) {
      pt.peer_us = timed([&](int i, CUstream s) { workload->launch_peer(i, s); }).median_us;
      pt.speedup_vs_peer = pt.peer_us / pt.ours.median_us;
      pt.error_vs_peer = workload->error_vs_peer(kernel, pt.config);
    }
    out.points.push_back(pt);
  }
  release_workloads();
  return out;
}

}  // namespace onecat
