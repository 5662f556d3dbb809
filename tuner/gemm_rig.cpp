#include "tuner/gemm_rig.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/op.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/rmsnorm.h"
#include "runtime/engine/gemm_launch.h"
#include "tuner/output_compare.h"
#include "tuner/random_weight.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

// Rows of poisoned output past the end, to catch writes out of bounds.
constexpr int64_t kGuardRows = 2;
constexpr unsigned char kPoisonByte = 0xff;  // NaN in fp16 and fp32
// norm=rms: x as a residual stream (RMS ~3.5, so a missing or wrong 1/rms shows) and a norm
// weight that differs per k (so does a wrong or unpermuted one).
constexpr float kNormX = 6.f, kNormEps = 1e-6f;

// Normwise relative error ‖gpu − ref‖₂ / ‖ref‖₂ allowed per format. The kernels sum 4–16
// fp16 products in fp16 before each fp32 flush (2^-11 relative per add) and int4 rounds
// (q − z)·s to fp16; the output rounds to fp16 once more (2^-11). Against the cuBLAS
// reference the weights were rounded to fp16 once more (2^-11 each, random).

}  // namespace

double gemm_tolerance(const gemm::Spec& s) {
  const double dot = quant::is_int4(s.format) ? 4e-3 : 3e-3;
  // silu_mul's output is the product of two such dot products (gate and up), whose independent
  // errors add: √2 times one's. Large outputs average below the single-product figure, but a
  // check with few outputs samples the error's spread (the moe family's one pair of 64 outputs:
  // 3.3e-3 for mxfp4 on the H200, a correct kernel).
  return s.epilogue == gemm::Epilogue::kSiluMul ? dot * std::sqrt(2.0) : dot;
}

ElementBound element_bound(const gemm::Spec& s) {
  // An output may stray kElementFactor times the normwise tolerance of its row's RMS (errors
  // of a correct kernel are spread over the row; a wrong tile corner is not), plus the fp16
  // output's own rounding: the kernel and the reference each round once (kHalfRelTolerance).
  constexpr double kElementFactor = 8;
  return {kElementFactor * gemm_tolerance(s), s.out_f32 ? 0.0 : kHalfRelTolerance};
}

namespace {

void sync(const std::string& what) {
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", what);
}

}  // namespace

GemmRig::GemmRig(const gemm::Spec& spec, uint64_t seed, int weight_copies) : spec_(spec), rng_(seed) {
  w_ = random_packed_weight(spec_, rng_);
  if (weight_copies == kRotate) weight_copies = rotation_copies(w_.bytes(), Driver::require_gpu().device_info(0).l2_bytes);
  for (int c = 0; c < std::max(1, weight_copies); ++c) {
    copies_.push_back({DeviceBuffer::from_host(w_.qweight.data(), w_.qweight.size()),
                       DeviceBuffer::from_host(w_.scales.data(), w_.scales.size()),
                       DeviceBuffer::from_host(w_.zeros.data(), w_.zeros.size()),
                       DeviceBuffer::from_host(w_.perm.data(), w_.perm.size() * 4)});
  }
}

GemmRig::~GemmRig() {
  if (cublas_) Cublas::find()->cublasDestroy(cublas_);
}

void GemmRig::prepare(int64_t m) {
  if (m < 1) throw InputError("gemm needs at least one token (m=" + std::to_string(m) + ")");
  m_ = m;
  const int64_t n_out = spec_.out_cols();
  x_ = spec_.norm ? random_half(rng_, size_t(m * spec_.k), -kNormX, kNormX)
                  : random_half(rng_, size_t(m * spec_.k), -2.f, 2.f);
  if (spec_.norm) {
    gamma_ = random_half(rng_, size_t(spec_.k), 0.5f, 1.5f);
    x_normed_.assign(x_.size(), 0);
    cpu::rmsnorm(x_normed_.data(), x_.data(), nullptr, gamma_.data(), kNormEps, m, spec_.k);
    d_gamma_ = DeviceBuffer::from_host(gamma_.data(), gamma_.size() * 2);
    d_x_normed_ = DeviceBuffer::from_host(x_normed_.data(), x_normed_.size() * 2);
  }
  bias_ = random_half(rng_, size_t(n_out), -1.f, 1.f);
  residual_ = random_half(rng_, size_t(m * n_out), -1.f, 1.f);
  d_x_ = DeviceBuffer::from_host(x_.data(), x_.size() * 2);
  d_bias_ = DeviceBuffer::from_host(bias_.data(), bias_.size() * 2);
  d_residual_ = DeviceBuffer::from_host(residual_.data(), residual_.size() * 2);
  d_y_ = DeviceBuffer(size_t((m + kGuardRows) * n_out) * (spec_.out_f32 ? 4 : 2));
  d_x_perm_ = DeviceBuffer();
  d_peer_ = DeviceBuffer();
  reference_.clear();
  reference_half_.clear();
}

void GemmRig::launch(const LoadedKernel& kernel, const gemm::Config& config, int copy, CUstream stream) {
  if (m_ < 1) throw Error("GemmRig::launch before prepare()");
  const Copy& w = copies_[size_t(copy) % copies_.size()];
  const int64_t floats = gemm::workspace_floats(spec_, config, m_), counters = gemm::workspace_counters(spec_, config, m_);
  workspace_.reserve(floats, counters);
  gemm::Args a;
  a.y = d_y_.ptr(), a.x = d_x_.ptr(), a.qweight = w.q.ptr();
  a.scales = w_.scales.empty() ? 0 : w.s.ptr(), a.zeros = w_.zeros.empty() ? 0 : w.z.ptr();
  a.perm = w_.perm.empty() ? 0 : w.p.ptr(), a.global_scale = w_.global_scale;
  a.bias = d_bias_.ptr(), a.residual = d_residual_.ptr(), a.m = m_;
  if (spec_.norm) a.norm_weight = d_gamma_.ptr(), a.norm_eps = kNormEps;
  a.partial = workspace_.partial(floats), a.counters = workspace_.counters(counters);
  const int64_t scratch = gemm::scratch_bytes(spec_, config, m_);
  if (size_t(scratch) > scratch_.bytes()) scratch_ = DeviceBuffer(size_t(scratch));
  a.scratch = scratch_.ptr();
  gemm::ready_for_launch(config);
  gemm::launch_op(spec_, config, kernel, a, stream);
}

void GemmRig::make_fp16_weights() {
  if (!w16_.empty()) return;
  Cublas& cublas = Cublas::require();
  cublas.check(cublas.cublasCreate(&cublas_), "cublasCreate", "creating a cuBLAS handle");
  cublas_workspace_ = DeviceBuffer(Cublas::kWorkspaceBytes);
  const std::vector<float> wf = cpu::dequantize(w_);
  std::vector<uint16_t> wh(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) wh[i] = cpu::float_to_half(wf[i]);
  for (size_t c = 0; c < copies_.size(); ++c) w16_.push_back(DeviceBuffer::from_host(wh.data(), wh.size() * 2));
}

void GemmRig::use_cublas_stream(CUstream stream) {
  Cublas& cublas = *Cublas::find();
  cublas.check(cublas.use_stream(cublas_, stream, cublas_workspace_), "cublasSetStream/cublasSetWorkspace",
               "choosing the fp16 peer's stream and workspace");
}

void GemmRig::launch_cublas(int copy, CUstream stream) {
  make_fp16_weights();
  if (!d_peer_.bytes()) d_peer_ = DeviceBuffer(size_t(m_ * spec_.n) * 2);
  Cublas& cublas = *Cublas::find();
  use_cublas_stream(stream);
  const float alpha = 1.f, beta = 0.f;
  const DeviceBuffer& wb = w16_[size_t(copy) % w16_.size()];
  cublas.check(cublas.gemm_xwt(cublas_, spec_.n, m_, spec_.k, alpha, wb.ptr(), d_x_.ptr(), beta, d_peer_.ptr(), false),
               "cublasGemmEx", "running the fp16 peer of " + spec_.to_string());
}

std::vector<float> GemmRig::cublas_product_f32() {
  make_fp16_weights();
  Cublas& cublas = *Cublas::find();
  use_cublas_stream(nullptr);
  // The dequantised weights are in packed column order: x goes through the same permutation.
  // norm=rms: the product of the normed x.
  const std::vector<uint16_t>& xh = spec_.norm ? x_normed_ : x_;
  CUdeviceptr x = spec_.norm ? d_x_normed_.ptr() : d_x_.ptr();
  if (!w_.perm.empty()) {
    std::vector<uint16_t> xp(xh.size());
    for (int64_t i = 0; i < m_; ++i) {
      for (int64_t k = 0; k < spec_.k; ++k) xp[size_t(i * spec_.k + k)] = xh[size_t(i * spec_.k + w_.perm[size_t(k)])];
    }
    d_x_perm_ = DeviceBuffer::from_host(xp.data(), xp.size() * 2);
    x = d_x_perm_.ptr();
  }
  DeviceBuffer out(size_t(m_ * spec_.n) * 4);
  const float alpha = 1.f, beta = 0.f;
  cublas.check(cublas.gemm_xwt(cublas_, spec_.n, m_, spec_.k, alpha, w16_[0].ptr(), x, beta, out.ptr(), true),
               "cublasGemmEx", "computing the reference of " + spec_.to_string());
  sync("computing the cuBLAS reference of " + spec_.to_string());
  std::vector<float> product(size_t(m_ * spec_.n));
  out.download(product.data(), product.size() * 4);
  return product;
}

const std::vector<float>& GemmRig::reference() {
  if (!reference_.empty()) return reference_;
  const int64_t n = spec_.n, n_out = spec_.out_cols();
  reference_.resize(size_t(m_ * n_out));
  cpu::GemmEpilogue epi;
  epi.kind = static_cast<cpu::GemmEpilogue::Kind>(static_cast<int>(spec_.epilogue));
  epi.bias = bias_.data();
  epi.residual = residual_.data();
  if (double(m_) * double(n) * double(spec_.k) <= kGemmCpuReferenceMacs) {
    cpu::gemm(w_, (spec_.norm ? x_normed_ : x_).data(), m_, epi, reference_.data());
    return reference_;
  }
  const std::vector<float> p = cublas_product_f32();
  for (int64_t i = 0; i < m_; ++i) {
    const float* a = &p[size_t(i * n)];
    float* y = &reference_[size_t(i * n_out)];
    for (int64_t j = 0; j < n_out; ++j) {
      switch (spec_.epilogue) {
        case gemm::Epilogue::kNone: y[j] = a[j]; break;
        case gemm::Epilogue::kBias: y[j] = a[j] + cpu::half_to_float(bias_[size_t(j)]); break;
        case gemm::Epilogue::kResidual: y[j] = a[j] + cpu::half_to_float(residual_[size_t(i * n_out + j)]); break;
        case gemm::Epilogue::kSiluMul: {
          const double gate = a[j];
          y[j] = float(gate / (1.0 + std::exp(-gate)) * a[n_out + j]);
          break;
        }
      }
    }
  }
  return reference_;
}

const std::vector<float>& GemmRig::reference_as_output() {
  if (reference_half_.empty()) reference_half_ = round_to_half(reference());
  return reference_half_;
}

CheckResult GemmRig::check(const LoadedKernel& kernel, const gemm::Config& config) {
  const std::vector<float>& want = reference();
  const int64_t n_out = spec_.out_cols();
  const size_t out_elem = spec_.out_f32 ? 4 : 2;
  const size_t out_bytes = d_y_.bytes();
  d_y_.fill_bytes(kPoisonByte);
  launch(kernel, config, 0);
  sync("running " + spec_.to_string() + " [" + config.to_string() + "]");
  std::vector<uint8_t> got(out_bytes);
  d_y_.download(got.data(), out_bytes);

  CheckResult res;
  res.rows = m_;
  res.tolerance = gemm_tolerance(spec_);
  res.metric = std::string("|gpu-ref|/|ref| (2-norm), reference: ") +
               (double(m_) * double(spec_.n) * double(spec_.k) <= kGemmCpuReferenceMacs ? "CPU fp64" : "cuBLAS fp32");
  // The fp16 output is compared with the reference rounded to fp16 the same way.
  const std::vector<float>& ref = spec_.out_f32 ? want : reference_as_output();
  const OutputDiff d = compare_outputs(got.data(), spec_.out_f32, ref.data(), m_, n_out, element_bound(spec_));
  if (d.first_nonfinite >= 0) {
    const int64_t i = d.first_nonfinite;
    res.detail = "y[" + std::to_string(i / n_out) + "][" + std::to_string(i % n_out) + "] = " +
                 std::to_string(d.nonfinite_value) + " (never written?), expected " + std::to_string(ref[size_t(i)]);
  }
  const double diff2 = d.diff2, ref2 = d.ref2;
  for (size_t i = size_t(m_ * n_out) * out_elem; i < out_bytes && res.detail.empty(); ++i) {
    if (got[i] != kPoisonByte) res.detail = "wrote past the last token (byte " + std::to_string(i) + ")";
  }
  if (res.detail.empty() && d.elements_over > 0) {
    const int64_t i = d.first_over;
    res.detail = std::to_string(d.elements_over) + " outputs outside the element-wise bound, the first y[" +
                 std::to_string(i / n_out) + "][" + std::to_string(i % n_out) + "] = " + std::to_string(d.first_over_got) +
                 ", expected " + std::to_string(d.first_over_want) + " within " + std::to_string(d.first_over_limit);
  }
  res.error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  res.passed = res.detail.empty() && res.error <= res.tolerance;
  return res;
}

double GemmRig::error_vs_cublas(const LoadedKernel& kernel, const gemm::Config& config) {
  if (spec_.epilogue != gemm::Epilogue::kNone || spec_.out_f32 || spec_.act_order || spec_.norm) {
    throw Error("error_vs_cublas needs a plain fp16 product spec, not " + spec_.to_string());
  }
  launch(kernel, config, 0);
  launch_cublas(0);
  sync("comparing " + spec_.to_string() + " with cuBLAS");
  std::vector<uint16_t> ours(size_t(m_ * spec_.n)), theirs(size_t(m_ * spec_.n));
  d_y_.download(ours.data(), ours.size() * 2);
  d_peer_.download(theirs.data(), theirs.size() * 2);
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double a = cpu::half_to_float(ours[i]), b = cpu::half_to_float(theirs[i]);
    d2 += (a - b) * (a - b);
    r2 += b * b;
  }
  return std::sqrt(d2 / std::max(r2, 1e-30));
}

}  // namespace onecat
