#include <random>
#include <vector>

#include "base/half.h"
#include "codegen/rmsnorm/emit.h"
#include "codegen/rmsnorm/op.h"
#include "runtime/cpu/rmsnorm.h"
#include "tuner/random_weight.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

// Whole rows past the end of each output, poisoned, to catch writes out of bounds.
constexpr int64_t kGuardRows = 2;
constexpr unsigned char kPoisonByte = 0xff;  // 0xffff is an fp16 NaN
constexpr float kEps = 1e-6f;

}  // namespace

CheckResult check_rmsnorm(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel,
                          int64_t rows, uint64_t seed) {
  const rmsnorm::Spec spec = rmsnorm::Spec::parse(spec_text);
  const rmsnorm::Config config = rmsnorm::Config::parse(spec, config_text);
  const int64_t n = rows * spec.hidden;
  const int64_t padded = (rows + kGuardRows) * spec.hidden;
  const size_t bytes = size_t(padded) * 2;

  std::mt19937_64 rng(seed);
  std::vector<uint16_t> x = random_half(rng, size_t(n), -3.f, 3.f);
  std::vector<uint16_t> residual = random_half(rng, size_t(n), -3.f, 3.f);
  std::vector<uint16_t> weight = random_half(rng, size_t(spec.hidden), -1.5f, 1.5f);

  DeviceBuffer d_out(bytes), d_x(bytes), d_res(bytes), d_w(size_t(spec.hidden) * 2);
  d_out.fill_bytes(kPoisonByte);
  d_res.fill_bytes(kPoisonByte);
  d_x.upload(x.data(), size_t(n) * 2);
  d_res.upload(residual.data(), size_t(n) * 2);
  d_w.upload(weight.data(), weight.size() * 2);

  launch(kernel, rmsnorm::make_call(spec, config, {d_out.ptr(), d_x.ptr(), d_res.ptr(), d_w.ptr(), kEps, rows}), nullptr);
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + spec_text + " [" + config_text + "]");

  std::vector<uint16_t> got_out(static_cast<size_t>(padded)), got_res(static_cast<size_t>(padded));
  d_out.download(got_out.data(), bytes);
  d_res.download(got_res.data(), bytes);

  std::vector<uint16_t> want_out(static_cast<size_t>(n));
  std::vector<uint16_t> want_res = residual;
  cpu::rmsnorm(want_out.data(), x.data(), spec.residual ? want_res.data() : nullptr, weight.data(), kEps, rows, spec.hidden);

  CheckResult r;
  r.rows = rows;
  r.seed = seed;
  r.tolerance = kHalfRelTolerance;
  r.metric = "max |gpu-ref|/(|ref|+2^-14)";
  compare_half(got_out.data(), want_out.data(), n, "out", r);
  // The residual sum is one fp32 add rounded to fp16 on both sides: it must match exactly.
  if (spec.residual) {
    for (int64_t i = 0; i < n && r.detail.empty(); ++i) {
      if (got_res[i] != want_res[i]) r.detail = "residual[" + std::to_string(i) + "] differs from x + residual";
    }
  }
  for (int64_t i = n; i < padded && r.detail.empty(); ++i) {
    if (got_out[i] != 0xffff || got_res[i] != 0xffff) r.detail = "wrote past the last row (element " + std::to_string(i) + ")";
  }
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

}  // namespace onecat
