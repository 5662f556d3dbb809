#include "tuner/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codegen/gemm/emit.h"
#include "codegen/rmsnorm/emit.h"
#include "runtime/cpu/half.h"
#include "runtime/cuda/error.h"
#include "tuner/gemm_rig.h"

namespace onecat {
namespace {

constexpr double kL2Multiple = 3.0;
constexpr size_t kMaxRotationBytes = size_t(8) << 30;

DeviceBuffer upload(const void* data, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes) b.upload(data, bytes);
  return b;
}

std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = cpu::float_to_half(dist(rng));
  return v;
}

int l2_bytes() { return Driver::require_gpu().device_info(0).l2_bytes; }

class GemmWorkload final : public Workload {
 public:
  GemmWorkload(std::shared_ptr<GemmRig> rig, int64_t m) : rig_(std::move(rig)) { rig_->prepare(m); }

  void launch(const LoadedKernel& kernel, const std::string& config, int i) override {
    rig_->launch(kernel, gemm::Config::parse(rig_->spec(), config), i);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return rig_->check(kernel, gemm::Config::parse(rig_->spec(), config));
  }

 private:
  std::shared_ptr<GemmRig> rig_;
};

// The last gemm spec's rig, for the next bucket of the same spec.
std::shared_ptr<GemmRig>& kept_rig() {
  static std::shared_ptr<GemmRig> rig;
  return rig;
}

class RmsnormWorkload final : public Workload {
 public:
  RmsnormWorkload(const std::string& spec_text, int64_t rows, uint64_t seed)
      : spec_(rmsnorm::Spec::parse(spec_text)), rows_(rows), seed_(seed) {
    std::mt19937_64 rng(seed);
    const size_t n = size_t(rows * spec_.hidden);
    for (int c = rotation_copies(n * 2 * (spec_.residual ? 2 : 1), l2_bytes()); c > 0; --c) {
      auto x = random_half(rng, n, 3.f), r = random_half(rng, n, 3.f);
      inputs_.push_back({upload(x.data(), n * 2), upload(r.data(), n * 2)});
    }
    auto w = random_half(rng, size_t(spec_.hidden), 1.5f);
    weight_ = upload(w.data(), w.size() * 2);
    out_ = DeviceBuffer(n * 2);
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i) override {
    const rmsnorm::Config c = rmsnorm::Config::parse(spec_, config);
    const Input& in = inputs_[size_t(i) % inputs_.size()];
    CUdeviceptr out = out_.ptr(), x = in.x.ptr(), res = spec_.residual ? in.residual.ptr() : 0, w = weight_.ptr();
    float eps = 1e-6f;
    int rows = int(rows_);
    void* args[] = {&out, &x, &res, &w, &eps, &rows};
    onecat::launch(kernel, rmsnorm::geometry(spec_, c, rows_), nullptr, args);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return check_rmsnorm(spec_.to_string(), config, kernel, rows_, seed_ + 1);
  }

 private:
  struct Input {
    DeviceBuffer x, residual;
  };
  rmsnorm::Spec spec_;
  int64_t rows_;
  uint64_t seed_;
  std::vector<Input> inputs_;
  DeviceBuffer weight_, out_;
};

}  // namespace

void release_workloads() { kept_rig().reset(); }

int rotation_copies(size_t bytes, int l2) {
  const double want = std::ceil(kL2Multiple * l2 / double(std::max<size_t>(bytes, 1)));
  const double most = double(std::max<size_t>(1, kMaxRotationBytes / std::max<size_t>(bytes, 1)));
  return int(std::clamp(want, 1.0, most));
}

std::unique_ptr<Workload> make_workload(const Family& family, const std::string& spec, int64_t m, uint64_t seed) {
  if (seed == 0) seed = std::random_device{}() | 1;
  if (family.name() == "gemm") {
    const gemm::Spec s = gemm::Spec::parse(spec);
    std::shared_ptr<GemmRig>& rig = kept_rig();
    if (!rig || rig->spec().to_string() != s.to_string()) {
      rig.reset();  // the previous spec's weights go before the next ones are made
      rig = std::make_shared<GemmRig>(s, seed, GemmRig::kRotate);
    }
    return std::make_unique<GemmWorkload>(rig, m);
  }
  if (family.name() == "rmsnorm") return std::make_unique<RmsnormWorkload>(spec, m, seed);
  throw Error("no tuning workload is written for family " + std::string(family.name()));
}

}  // namespace onecat
