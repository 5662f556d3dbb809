// The rmsnorm family on the GPU against the CPU reference, and the store across processes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <cstdio>
#include <string>

#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

Arch gpu_arch() { return Arch{Driver::find()->device_info(0).sm}; }

std::string temp_dir() {
  char tmpl[] = "/tmp/onecat-gpu-XXXXXX";
  return mkdtemp(tmpl);
}

struct Fixture : ::testing::Test {
  void SetUp() override {
    dir = temp_dir();
    store = std::make_unique<Store>(dir + "/kernels.sqlite");
    jit = std::make_unique<JitService>(store.get());
  }
  CheckResult run(const std::string& spec, const std::string& config, int64_t rows) {
    const Family& f = family_of(spec);
    CompileResult c = jit->get(CompileRequest::make(f, spec, config, gpu_arch()));
    const LoadedKernel& k = ModuleTable::get().load(c.binary);
    return check_kernel(f, spec, config, k, rows);
  }
  std::string dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<JitService> jit;
};

std::string spec_of(int hidden, bool residual) {
  return "rmsnorm:hidden=" + std::to_string(hidden) + ",dtype=f16,residual=" + (residual ? "1" : "0");
}

TEST_F(Fixture, DefaultConfigsManyHiddenSizes) {
  for (int hidden : {1, 7, 64, 127, 128, 1000, 2047, 2048, 3584, 4096, 5120, 8191, 8192, 12345, 16383, 16384, 32768}) {
    for (bool residual : {false, true}) {
      const std::string spec = spec_of(hidden, residual);
      for (int64_t rows : {1, 3, 257}) {
        const std::string config = family_of(spec).default_config(spec, rows, gpu_arch());
        CheckResult r = run(spec, config, rows);
        EXPECT_TRUE(r.passed) << spec << " [" << config << "] rows=" << rows << " seed=" << r.seed
                              << " err=" << r.error << " " << r.detail;
      }
    }
  }
}

TEST_F(Fixture, EveryCandidateConfig) {
  for (int hidden : {4096, 4095, 96}) {
    const std::string spec = spec_of(hidden, true);
    for (const std::string& config : family_of(spec).candidate_configs(spec, gpu_arch())) {
      CheckResult r = run(spec, config, 33);
      EXPECT_TRUE(r.passed) << spec << " [" << config << "] seed=" << r.seed << " err=" << r.error << " "
                            << r.detail;
    }
  }
}

TEST_F(Fixture, WrongKernelIsCaught) {
  // A kernel built for another hidden size must fail the check (the check is not vacuous).
  const std::string spec = spec_of(4096, false), other = spec_of(4088, false);
  const Family& f = family_of(spec);
  CompileResult c = jit->get(CompileRequest::make(f, other, f.default_config(other, 1, gpu_arch()), gpu_arch()));
  const LoadedKernel& k = ModuleTable::get().load(c.binary);
  CheckResult r = check_kernel(f, spec, "row_threads=256,vec=8,rows=1", k, 5);
  EXPECT_FALSE(r.passed);
}

nlohmann::json run_cli(const std::string& args, const std::string& cache_dir) {
  std::string cmd = "ONECAT_CACHE_DIR=" + cache_dir + " " + ONECAT_BIN + " " + args;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  EXPECT_EQ(status, 0) << cmd << "\n" << out;
  return nlohmann::json::parse(out);
}

TEST_F(Fixture, SecondProcessLoadsFromStoreWithoutCompiling) {
  const std::string spec = spec_of(5120, true);
  nlohmann::json first = run_cli("compile " + spec + " --json", dir);
  ASSERT_EQ(first["kernels"].size(), 1u);
  EXPECT_FALSE(first["kernels"][0]["cache_hit"].get<bool>());
  nlohmann::json second = run_cli("check " + spec + " --rows 77 --json", dir);
  EXPECT_TRUE(second["cache_hit"].get<bool>());
  EXPECT_TRUE(second["passed"].get<bool>()) << second.dump();
}

}  // namespace
}  // namespace onecat
