// The embedding and rope families on the GPU against their CPU references (tuner checks:
// tuner/verify_embedding.cpp, tuner/verify_rope.cpp; each rope check runs the default, linear,
// llama3 and yarn tables at positions up to 128K).
#include <gtest/gtest.h>

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

class OpsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/onecat-gpu-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::make_unique<Store>(dir_ + "/kernels.sqlite");
    jit_ = std::make_unique<JitService>(store_.get());
  }
  const LoadedKernel& kernel(const std::string& spec, const std::string& config) {
    CompileResult c = jit_->get(CompileRequest::make(family_of(spec), spec, config, gpu_arch()));
    return ModuleTable::get().load(c.binary);
  }
  CheckResult run(const std::string& spec, const std::string& config, int64_t tokens) {
    return check_kernel(family_of(spec), spec, config, kernel(spec, config), tokens);
  }
  void expect_default_passes(const std::string& spec, int64_t tokens) {
    const std::string config = family_of(spec).default_config(spec, tokens, gpu_arch());
    const CheckResult r = run(spec, config, tokens);
    EXPECT_TRUE(r.passed) << spec << " [" << config << "] tokens=" << tokens << " seed=" << r.seed << " err=" << r.error
                          << " " << r.detail;
  }
  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JitService> jit_;
};

class EmbeddingGpu : public OpsGpu {};
class RopeGpu : public OpsGpu {};

TEST_F(EmbeddingGpu, DefaultConfigsManyShapes) {
  for (const char* spec :
       {"embedding:vocab=151936,hidden=4096", "embedding:vocab=128256,hidden=5120", "embedding:vocab=1000,hidden=100",
        "embedding:vocab=50,hidden=7", "embedding:vocab=32000,hidden=2048"}) {
    for (int64_t tokens : {1, 3, 257, 4099}) expect_default_passes(spec, tokens);
  }
}

TEST_F(EmbeddingGpu, EveryCandidateConfig) {
  for (const char* spec : {"embedding:vocab=32000,hidden=4096", "embedding:vocab=999,hidden=100"}) {
    for (const std::string& config : family_of(spec).candidate_configs(spec, gpu_arch())) {
      const CheckResult r = run(spec, config, 33);
      EXPECT_TRUE(r.passed) << spec << " [" << config << "] seed=" << r.seed << " " << r.detail;
    }
  }
}

TEST_F(EmbeddingGpu, WrongKernelIsCaught) {
  // A kernel built for a smaller vocabulary zeroes rows the spec holds: the check must fail.
  const std::string spec = "embedding:vocab=32000,hidden=4096", other = "embedding:vocab=16000,hidden=4096";
  const std::string config = family_of(spec).default_config(spec, 1, gpu_arch());
  EXPECT_FALSE(check_kernel(family_of(spec), spec, config, kernel(other, config), 65).passed);
}

// Every head dim, GQA groups 1 … 8, with and without the q/k norm, every output mode, odd token
// counts.
TEST_F(RopeGpu, DefaultConfigsEveryShapeAndOutput) {
  const char* outputs[] = {"kv_out=dense", "kv_out=pages,page=16,kv=f16", "kv_out=pages,page=16,kv=e4m3",
                           "kv_out=pages,page=7,kv=e5m2,kv_scale=head"};
  const int kv_group[][2] = {{1, 1}, {2, 4}, {8, 4}, {4, 6}, {2, 8}};
  for (int dim : {64, 128, 256}) {
    for (const auto& [kv_heads, group] : kv_group) {
      for (int qk_norm : {0, 1}) {
        for (const char* out : outputs) {
          const std::string spec = "rope:heads=" + std::to_string(kv_heads * group) +
                                   ",kv_heads=" + std::to_string(kv_heads) + ",dim=" + std::to_string(dim) +
                                   ",qk_norm=" + std::to_string(qk_norm) + "," + out;
          for (int64_t tokens : {1, 7, 301}) expect_default_passes(spec, tokens);
        }
      }
    }
  }
}

TEST_F(RopeGpu, ManyTokensAndOddHeadDim) {
  expect_default_passes("rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16", 4099);
  expect_default_passes("rope:heads=12,kv_heads=2,dim=96,qk_norm=1,kv_out=dense", 77);
}

TEST_F(RopeGpu, EveryCandidateConfig) {
  for (const char* spec : {"rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense",
                           "rope:heads=16,kv_heads=2,dim=64,qk_norm=0,kv_out=pages,page=16,kv=e4m3",
                           "rope:heads=8,kv_heads=1,dim=256,qk_norm=1,kv_out=pages,page=16,kv=f16"}) {
    for (const std::string& config : family_of(spec).candidate_configs(spec, gpu_arch())) {
      const CheckResult r = run(spec, config, 37);
      EXPECT_TRUE(r.passed) << spec << " [" << config << "] seed=" << r.seed << " err=" << r.error << " " << r.detail;
    }
  }
}

TEST_F(RopeGpu, WrongKernelsAreCaught) {
  // Without the norm the outputs are far off; with the heads of another shape the rows land
  // elsewhere; dense K/V in place of the cache leave the cache unwritten.
  const std::string spec = "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense";
  const std::string config = family_of(spec).default_config(spec, 1, gpu_arch());
  for (const char* other : {"rope:heads=32,kv_heads=8,dim=128,qk_norm=0,kv_out=dense",
                            "rope:heads=40,kv_heads=4,dim=128,qk_norm=1,kv_out=dense"}) {
    EXPECT_FALSE(check_kernel(family_of(spec), spec, config, kernel(other, config), 9).passed) << other;
  }
  const std::string paged = "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16";
  EXPECT_FALSE(check_kernel(family_of(paged), paged, config, kernel(spec, config), 9).passed);
}

}  // namespace
}  // namespace onecat
