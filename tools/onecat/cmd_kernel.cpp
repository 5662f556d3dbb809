#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "base/error.h"
#include "codegen/family.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/session.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tools/onecat/commands.h"
#include "tuner/verify.h"

namespace onecat::cli {
namespace {

struct KernelArgs {
  std::vector<std::string> specs;
  std::string config;  // empty: the family default
  std::string arch = "native";
  bool json = false;
};

void add_kernel_args(CLI::App* cmd, KernelArgs& a, bool many_specs) {
  if (many_specs) {
    cmd->add_option("spec", a.specs, "Kernel spec(s), e.g. rmsnorm:hidden=4096,dtype=f16,residual=1")->required();
  } else {
    cmd->add_option("spec", a.specs, "Kernel spec, e.g. rmsnorm:hidden=4096,dtype=f16,residual=1")->required()->expected(1);
  }
  cmd->add_option("--config", a.config, "Config (default: the family's untuned default)");
}

// The given config, or the family's default for m tokens on arch.
std::string config_or_default(const Family& f, const std::string& spec, const std::string& config, int64_t m, Arch arch) {
  return config.empty() ? f.default_config(spec, m, arch) : config;
}

nlohmann::json result_json(const CompileResult& r) {
  const KernelBinary& b = r.binary;
  return {{"spec", b.spec},
          {"config", b.config},
          {"arch", b.arch},
          {"key", b.key},
          {"nvrtc_version", b.nvrtc_version},
          {"lowered_name", b.lowered_name},
          {"registers", b.usage.registers},
          {"shared_bytes", b.usage.shared_bytes},
          {"spill_store_bytes", b.usage.spill_store_bytes},
          {"spill_load_bytes", b.usage.spill_load_bytes},
          {"stack_bytes", b.usage.stack_bytes},
          {"cubin_bytes", b.cubin.size()},
          {"compile_ms", b.compile_ms},
          {"elapsed_ms", r.elapsed_ms},
          {"cache_hit", r.cache_hit}};
}

void add_emit(CLI::App& app) {
  auto* cmd = app.add_subcommand("emit", "Print the generated CUDA source of a kernel");
  auto a = std::make_shared<KernelArgs>();
  a->arch = "sm_70";
  add_kernel_args(cmd, *a, false);
  cmd->add_option("--arch", a->arch, "Target arch (default sm_70)");
  auto ptx = std::make_shared<bool>(false);
  cmd->add_flag("--ptx", *ptx, "Print the PTX NVRTC makes of it instead");
  cmd->callback([a, ptx] {
    const Family& f = family_of(a->specs[0]);
    Arch arch = resolve_arch(a->arch);
    CompileRequest req = CompileRequest::make(f, a->specs[0], config_or_default(f, a->specs[0], a->config, 1, arch), arch);
    if (*ptx) {
      std::cout << compile_to_ptx(req, NvrtcRegistry::get().for_arch(arch));
    } else {
      std::cout << req.emitted.source << "// kernel: " << req.emitted.kernel_expression << "\n";
    }
  });
}

void add_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Compile kernels (or find them in the cache) and report their resources");
  auto a = std::make_shared<KernelArgs>();
  add_kernel_args(cmd, *a, true);
  cmd->add_option("--arch", a->arch, "Target arch, e.g. sm_70 (default: this machine's GPU)");
  cmd->add_flag("--json", a->json, "Print JSON");
  auto all = std::make_shared<bool>(false);
  auto no_cache = std::make_shared<bool>(false);
  auto jobs = std::make_shared<int>(int(std::max(1u, std::thread::hardware_concurrency())));
  auto parallel = std::make_shared<std::string>("threads");
  cmd->add_flag("--all-configs", *all, "Compile every candidate config of each spec, not only the default");
  cmd->add_flag("--no-cache", *no_cache, "Compile even when the cache has the kernel, and store nothing");
  auto load = std::make_shared<bool>(false);
  cmd->add_flag("--load", *load, "Also load each kernel onto this machine's GPU and report the load time");
  cmd->add_option("--jobs,-j", *jobs, "Kernels compiled at once (default: CPU count)")->check(CLI::Range(1, 1024));
  cmd->add_option("--parallel", *parallel, "threads or processes")->check(CLI::IsMember({"threads", "processes"}));
  cmd->callback([a, all, no_cache, jobs, parallel, load] {
    Arch arch = resolve_arch(a->arch);
    std::vector<CompileRequest> reqs;
    for (const auto& spec : a->specs) {
      const Family& f = family_of(spec);
      std::vector<std::string> configs = *all ? f.candidate_configs(spec, arch) : std::vector{config_or_default(f, spec, a->config, 1, arch)};
      for (const auto& c : configs) reqs.push_back(CompileRequest::make(f, spec, c, arch));
    }
    // The Session's compile service and store, or with --no-cache one that stores nothing.
    std::unique_ptr<JitService> uncached;
    if (*no_cache) uncached = std::make_unique<JitService>(nullptr);
    JitService& jit = *no_cache ? *uncached : Session::get().jit();
    Progress progress("compiling " + std::to_string(reqs.size()) + " kernels for " + arch.name(), reqs.size());
    const bool show_progress = reqs.size() > 1;
    const auto start = std::chrono::steady_clock::now();
    auto results = jit.get_all(reqs, *jobs, *parallel == "processes" ? Parallelism::kProcesses : Parallelism::kThreads,
                               [&](size_t) {
                                 if (show_progress) progress.tick();
                               });
    if (show_progress) progress.done();
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (results.size() == 1 && !results[0].error.empty()) throw Error(results[0].error);
    int failures = 0;
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].error.empty()) {
        ++failures;
        std::fprintf(stderr, "onecat: error: %s\n", results[i].error.c_str());
        out.push_back({{"spec", reqs[i].spec}, {"config", reqs[i].config}, {"arch", arch.name()}, {"error", results[i].error}});
      } else {
        out.push_back(result_json(results[i]));
        if (*load) {
          if (i == 0) use_device(0);
          const auto t0 = std::chrono::steady_clock::now();
          ModuleTable::get().load(results[i].binary);
          out.back()["load_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
      }
    }
    if (a->json) {
      std::cout << nlohmann::json{{"kernels", out}, {"wall_ms", wall_ms}, {"jobs", *jobs}, {"parallel", *parallel}}.dump(2) << "\n";
    } else {
      // A hit compiled nothing: its compile column is empty, not the time of the original compile.
      Table table({"spec", "config", "arch", "regs", "smem", "spill", "cubin", "compile", "cache"}, {3, 4, 5, 6, 7});
      for (const auto& k : out) {
        if (k.contains("error")) continue;
        const bool hit = k["cache_hit"].get<bool>();
        table.row({k["spec"], k["config"], k["arch"], std::to_string(k["registers"].get<int>()),
                   std::to_string(k["shared_bytes"].get<int>()),
                   std::to_string(k["spill_store_bytes"].get<int>() + k["spill_load_bytes"].get<int>()),
                   std::to_string(k["cubin_bytes"].get<size_t>()), hit ? "-" : format("%.0fms", k["compile_ms"].get<double>()),
                   hit ? "hit" : "miss"});
      }
      table.print();
      if (results.size() > 1) std::printf("%zu kernels in %.0f ms with %d %s\n", results.size(), wall_ms, *jobs, parallel->c_str());
    }
    if (failures) throw Error(std::to_string(failures) + " of " + std::to_string(results.size()) + " kernels failed to compile");
  });
}

void add_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Run a kernel on this GPU against the CPU reference on fresh random data");
  auto a = std::make_shared<KernelArgs>();
  add_kernel_args(cmd, *a, false);
  cmd->add_flag("--json", a->json, "Print JSON");
  auto rows = std::make_shared<int64_t>(1000);
  auto seed = std::make_shared<uint64_t>(0);
  cmd->add_option("--rows", *rows, "Rows (tokens) to run (default 1000)")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--seed", *seed, "Input seed, to reproduce a failure (default: fresh)");
  cmd->callback([a, rows, seed] {
    const Family& f = family_of(a->specs[0]);
    const std::string spec = f.canonical_spec(a->specs[0]);
    Session& session = Session::get();
    session.use_gpu(0);
    const Arch arch = session.arch();
    const std::string config = f.canonical_config(spec, config_or_default(f, spec, a->config, *rows, arch));
    CompileResult compiled = session.jit().get(CompileRequest::make(f, spec, config, arch));
    const LoadedKernel& kernel = ModuleTable::get().load(compiled.binary);
    CheckResult r = check_kernel(f, spec, config, kernel, *rows, *seed);
    if (a->json) {
      std::cout << nlohmann::json{{"spec", spec}, {"config", config}, {"arch", arch.name()}, {"rows", r.rows},
                                  {"seed", r.seed}, {"error", r.error}, {"metric", r.metric}, {"tolerance", r.tolerance},
                                  {"passed", r.passed}, {"detail", r.detail}, {"cache_hit", compiled.cache_hit}}
                       .dump(2)
                << "\n";
    } else {
      std::printf("%s [%s] on %s, %lld rows, seed %llu: error %.3g (%s, tolerance %.3g) %s\n", spec.c_str(),
                  config.c_str(), arch.name().c_str(), (long long)r.rows, (unsigned long long)r.seed, r.error,
                  r.metric.c_str(), r.tolerance, r.passed ? "PASS" : "FAIL");
      if (!r.detail.empty()) std::printf("  %s\n", r.detail.c_str());
    }
    if (!r.passed) throw CLI::RuntimeError(1);
  });
}

}  // namespace

void add_kernel_commands(CLI::App& app) {
  add_emit(app);
  add_compile(app);
  add_check(app);
}

}  // namespace onecat::cli
