#include "tuner/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codegen/gemm/emit.h"
#include "codegen/rmsnorm/emit.h"
#include "runtime/cpu/half.h"
#include "runtime/cuda/error.h"
#include "tuner/random_weight.h"

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
  GemmWorkload(const std::string& spec_text, int64_t m) : spec_(gemm::Spec::parse(spec_text)), m_(m) {
    std::mt19937_64 rng(std::random_device{}());
    w_ = random_packed_weight(spec_, rng);
    for (int c = rotation_copies(w_.bytes(), l2_bytes()); c > 0; --c) {
      copies_.push_back({upload(w_.qweight.data(), w_.qweight.size()), upload(w_.scales.data(), w_.scales.size()),
                         upload(w_.zeros.data(), w_.zeros.size()), upload(w_.perm.data(), w_.perm.size() * 4)});
    }
    const int64_t n_out = spec_.out_cols();
    auto x = random_half(rng, size_t(m * spec_.k), 1.f), b = random_half(rng, size_t(n_out), 1.f);
    auto r = random_half(rng, size_t(m * n_out), 1.f);
    x_ = upload(x.data(), x.size() * 2), bias_ = upload(b.data(), b.size() * 2), residual_ = upload(r.data(), r.size() * 2);
    y_ = DeviceBuffer(size_t(m * n_out) * (spec_.out_f32 ? 4 : 2));
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i) override {
    const gemm::Config c = gemm::Config::parse(spec_, config);
    const Copy& w = copies_[size_t(i) % copies_.size()];
    CUdeviceptr y = y_.ptr(), x = x_.ptr(), q = w.q.ptr();
    CUdeviceptr s = w_.scales.empty() ? 0 : w.s.ptr(), z = w_.zeros.empty() ? 0 : w.z.ptr();
    CUdeviceptr p = w_.perm.empty() ? 0 : w.p.ptr();
    CUdeviceptr b = spec_.epilogue == gemm::Epilogue::kBias ? bias_.ptr() : 0;
    CUdeviceptr r = spec_.epilogue == gemm::Epilogue::kResidual ? residual_.ptr() : 0;
    float global_scale = w_.global_scale;
    int m = int(m_);
    void* args[] = {&y, &x, &q, &s, &z, &p, &global_scale, &b, &r, &m};
    onecat::launch(kernel, gemm::geometry(spec_, c, m_), nullptr, args);
  }

 private:
  struct Copy {
    DeviceBuffer q, s, z, p;
  };
  gemm::Spec spec_;
  int64_t m_;
  quant::PackedWeight w_;
  std::vector<Copy> copies_;
  DeviceBuffer x_, bias_, residual_, y_;
};

class RmsnormWorkload final : public Workload {
 public:
  RmsnormWorkload(const std::string& spec_text, int64_t rows) : spec_(rmsnorm::Spec::parse(spec_text)), rows_(rows) {
    std::mt19937_64 rng(std::random_device{}());
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

 private:
  struct Input {
    DeviceBuffer x, residual;
  };
  rmsnorm::Spec spec_;
  int64_t rows_;
  std::vector<Input> inputs_;
  DeviceBuffer weight_, out_;
};

}  // namespace

int rotation_copies(size_t bytes, int l2) {
  const double want = std::ceil(kL2Multiple * l2 / double(std::max<size_t>(bytes, 1)));
  const double most = double(std::max<size_t>(1, kMaxRotationBytes / std::max<size_t>(bytes, 1)));
  return int(std::clamp(want, 1.0, most));
}

std::unique_ptr<Workload> make_workload(const Family& family, const std::string& spec, int64_t m) {
  if (family.name() == "gemm") return std::make_unique<GemmWorkload>(spec, m);
  if (family.name() == "rmsnorm") return std::make_unique<RmsnormWorkload>(spec, m);
  throw Error("no tuning workload is written for family " + std::string(family.name()));
}

}  // namespace onecat
