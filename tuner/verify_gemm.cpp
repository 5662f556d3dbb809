#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codegen/gemm/emit.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/half.h"
#include "tuner/random_weight.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

// Rows of poisoned output past the end, to catch writes out of bounds.
constexpr int64_t kGuardRows = 2;
constexpr unsigned char kPoisonByte = 0xff;  // NaN in fp16 and fp32

// Normwise relative error ‖gpu − ref‖₂ / ‖ref‖₂ allowed per format. The kernels sum 4–16
// fp16 products in fp16 before each fp32 flush (2^-11 relative per add) and int4 rounds
// (q − z)·s to fp16; the output rounds to fp16 once more (2^-11).
double tolerance(const gemm::Spec& s) {
  return s.format == quant::WeightFormat::kAwq4 || s.format == quant::WeightFormat::kGptq4 ? 4e-3 : 3e-3;
}

std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = cpu::float_to_half(dist(rng));
  return v;
}

DeviceBuffer upload(const void* data, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes) b.upload(data, bytes);
  return b;
}

}  // namespace

CheckResult check_gemm(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel, int64_t m,
                       uint64_t seed) {
  const gemm::Spec spec = gemm::Spec::parse(spec_text);
  const gemm::Config config = gemm::Config::parse(spec, config_text);
  std::mt19937_64 rng(seed);
  const quant::PackedWeight w = random_packed_weight(spec, rng);
  const int64_t n_out = spec.out_cols();
  const std::vector<uint16_t> x = random_half(rng, size_t(m * spec.k), 2.f);
  const std::vector<uint16_t> bias = random_half(rng, size_t(n_out), 1.f);
  const std::vector<uint16_t> residual = random_half(rng, size_t(m * n_out), 1.f);

  const size_t out_elem = spec.out_f32 ? 4 : 2;
  const size_t out_bytes = size_t((m + kGuardRows) * n_out) * out_elem;
  DeviceBuffer d_y(out_bytes);
  d_y.fill_bytes(kPoisonByte);
  DeviceBuffer d_x = upload(x.data(), x.size() * 2);
  DeviceBuffer d_q = upload(w.qweight.data(), w.qweight.size());
  DeviceBuffer d_s = upload(w.scales.data(), w.scales.size());
  DeviceBuffer d_z = upload(w.zeros.data(), w.zeros.size());
  DeviceBuffer d_p = upload(w.perm.data(), w.perm.size() * 4);
  DeviceBuffer d_b = upload(bias.data(), bias.size() * 2);
  DeviceBuffer d_r = upload(residual.data(), residual.size() * 2);

  CUdeviceptr y = d_y.ptr(), xp = d_x.ptr(), q = d_q.ptr(), sc = w.scales.empty() ? 0 : d_s.ptr();
  CUdeviceptr z = w.zeros.empty() ? 0 : d_z.ptr(), perm = w.perm.empty() ? 0 : d_p.ptr();
  CUdeviceptr b = spec.epilogue == gemm::Epilogue::kBias ? d_b.ptr() : 0;
  CUdeviceptr r = spec.epilogue == gemm::Epilogue::kResidual ? d_r.ptr() : 0;
  float global_scale = w.global_scale;
  int m_arg = static_cast<int>(m);
  void* args[] = {&y, &xp, &q, &sc, &z, &perm, &global_scale, &b, &r, &m_arg};
  launch(kernel, gemm::geometry(spec, config, m), nullptr, args);
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + spec_text + " [" + config_text + "]");

  std::vector<uint8_t> got(out_bytes);
  d_y.download(got.data(), out_bytes);

  cpu::GemmEpilogue epi;
  epi.kind = static_cast<cpu::GemmEpilogue::Kind>(static_cast<int>(spec.epilogue));
  epi.bias = bias.data();
  epi.residual = residual.data();
  std::vector<float> want(size_t(m * n_out));
  cpu::gemm(w, x.data(), m, epi, want.data());

  CheckResult res;
  res.rows = m;
  res.seed = seed;
  res.tolerance = tolerance(spec);
  res.metric = "|gpu-ref|/|ref| (2-norm)";
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < m * n_out; ++i) {
    double g;
    if (spec.out_f32) {
      float f;
      std::memcpy(&f, got.data() + 4 * i, 4);
      g = f;
    } else {
      uint16_t h;
      std::memcpy(&h, got.data() + 2 * i, 2);
      g = cpu::half_to_float(h);
    }
    // The fp16 output is compared with the reference rounded to fp16 the same way.
    const double ref = spec.out_f32 ? want[i] : cpu::half_to_float(cpu::float_to_half(want[i]));
    if (!std::isfinite(g) && res.detail.empty()) {
      res.detail = "y[" + std::to_string(i / n_out) + "][" + std::to_string(i % n_out) + "] = " + std::to_string(g) +
                   " (never written?), expected " + std::to_string(ref);
    }
    diff2 += (g - ref) * (g - ref);
    ref2 += ref * ref;
  }
  for (size_t i = size_t(m * n_out) * out_elem; i < out_bytes && res.detail.empty(); ++i) {
    if (got[i] != kPoisonByte) res.detail = "wrote past the last token (byte " + std::to_string(i) + ")";
  }
  res.error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  res.passed = res.detail.empty() && res.error <= res.tolerance;
  return res;
}

}  // namespace onecat
