// The rmsnorm family on the GPU against the CPU reference, and the store across processes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <cstdio>
#include <string>

#include "base/half.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "codegen/rmsnorm/op.h"
#include "runtime/cpu/rmsnorm.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/prepared_op.h"
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

// What the engine will hold: a PreparedOp launches the dispatched kernel through the family's
// typed op (spec parsed once, one config and kernel per bucket), here against the CPU reference
// at three row counts of two buckets.
TEST(PreparedOpGpu, RmsnormThroughTheSessionMatchesTheCpuReference) {
  Session& session = Session::get();
  session.use_gpu(0);
  PreparedOp<rmsnorm::Spec, rmsnorm::Config, rmsnorm::Args> op(session, "rmsnorm:residual=1,hidden=1000,dtype=f16");
  EXPECT_EQ(op.spec().to_string(), "rmsnorm:hidden=1000,dtype=f16,residual=1");
  for (int64_t rows : {1, 5, 8}) {
    SCOPED_TRACE(rows);
    const int64_t n = rows * 1000;
    std::vector<uint16_t> x(static_cast<size_t>(n)), res(static_cast<size_t>(n)), w(1000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = cpu::float_to_half(float((i * 37 % 101) - 50) / 25.f);
    for (size_t i = 0; i < res.size(); ++i) res[i] = cpu::float_to_half(float((i * 13 % 97) - 48) / 30.f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = cpu::float_to_half(0.5f + float(i % 7) / 10.f);
    DeviceBuffer dx = DeviceBuffer::from_host(x.data(), x.size() * 2), dres = DeviceBuffer::from_host(res.data(), res.size() * 2);
    DeviceBuffer dw = DeviceBuffer::from_host(w.data(), w.size() * 2), dout(size_t(n) * 2);
    dout.fill_bytes(0xff);
    EXPECT_EQ(op.workspace_bytes(rows), 0);
    op.launch({dout.ptr(), dx.ptr(), dres.ptr(), dw.ptr(), 1e-6f, rows}, rows, nullptr);
    Driver& d = *Driver::find();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "a PreparedOp launch");
    std::vector<uint16_t> got(static_cast<size_t>(n)), got_res(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    dout.download(got.data(), got.size() * 2);
    dres.download(got_res.data(), got_res.size() * 2);
    cpu::rmsnorm(want.data(), x.data(), res.data(), w.data(), 1e-6f, rows, 1000);
    CheckResult r;
    r.tolerance = kHalfRelTolerance;
    compare_half(got.data(), want.data(), n, "out", r);
    compare_half(got_res.data(), res.data(), n, "residual", r);
    EXPECT_TRUE(r.detail.empty()) << r.detail;
  }
}

}  // namespace
}  // namespace onecat
