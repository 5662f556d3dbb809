#include "tuner/bench_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "codegen/family.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/space.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/half.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/random_weight.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

// cuBLAS enum values (cublas_api.h, library_types.h).
constexpr int kOpN = 0, kOpT = 1, kR16F = 2, kCompute32F = 68, kGemmDefault = -1;
std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = cpu::float_to_half(dist(rng));
  return v;
}

struct DeviceWeight {
  DeviceBuffer q, s, z, p;
};

DeviceBuffer upload(const void* data, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes) b.upload(data, bytes);
  return b;
}

double norm_error(const std::vector<uint16_t>& a, const std::vector<uint16_t>& ref) {
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = cpu::half_to_float(a[i]), y = cpu::half_to_float(ref[i]);
    d2 += (x - y) * (x - y);
    r2 += y * y;
  }
  return std::sqrt(d2 / std::max(r2, 1e-30));
}

}  // namespace

GemmBench bench_gemm(const std::string& spec_text, const std::vector<int64_t>& ms, const GemmBenchOptions& options,
                     Store* store) {
  Driver& d = Driver::require_gpu();
  use_device(0);
  const DeviceInfo info = d.device_info(0);
  const Arch arch{info.sm};
  const Family& family = family_of(spec_text);
  const gemm::Spec spec = gemm::Spec::parse(spec_text);
  GemmBench out;
  out.spec = spec.to_string();
  out.device = info.name;
  out.copy_gbps = measure_copy_bandwidth() / 1e9;

  std::mt19937_64 rng(std::random_device{}());
  const quant::PackedWeight w = random_packed_weight(spec, rng);
  const int copies = rotation_copies(w.bytes(), info.l2_bytes);
  std::vector<DeviceWeight> dw;
  for (int c = 0; c < copies; ++c) {
    dw.push_back({upload(w.qweight.data(), w.qweight.size()), upload(w.scales.data(), w.scales.size()),
                  upload(w.zeros.data(), w.zeros.size()), upload(w.perm.data(), w.perm.size() * 4)});
  }
  const int64_t n_out = spec.out_cols();
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  const std::vector<uint16_t> x = random_half(rng, size_t(max_m * spec.k));
  const std::vector<uint16_t> bias = random_half(rng, size_t(n_out));
  const std::vector<uint16_t> residual = random_half(rng, size_t(max_m * n_out));
  DeviceBuffer d_x = upload(x.data(), x.size() * 2), d_b = upload(bias.data(), bias.size() * 2);
  DeviceBuffer d_r = upload(residual.data(), residual.size() * 2);
  DeviceBuffer d_y(size_t(max_m * n_out) * (spec.out_f32 ? 4 : 2));

  // The peer: cuBLAS fp16 on the dequantised weights (plain product only).
  const bool peer = spec.epilogue == gemm::Epilogue::kNone && !spec.out_f32 && !spec.act_order;
  Cublas* cublas = peer ? &Cublas::require() : nullptr;
  cublasHandle_t handle = nullptr;
  std::vector<DeviceBuffer> w16;
  DeviceBuffer d_y16;
  if (peer) {
    cublas->check(cublas->cublasCreate(&handle), "cublasCreate", "creating a cuBLAS handle");
    const std::vector<float> wf = cpu::dequantize(w);
    std::vector<uint16_t> wh(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) wh[i] = cpu::float_to_half(wf[i]);
    const int fp16_copies = rotation_copies(wh.size() * 2, info.l2_bytes);
    for (int c = 0; c < fp16_copies; ++c) w16.push_back(upload(wh.data(), wh.size() * 2));
    d_y16 = DeviceBuffer(size_t(max_m * n_out) * 2);
  }

  JitService jit(store);
  for (int64_t m : ms) {
    GemmBenchPoint pt;
    pt.m = m;
    pt.default_config = family.default_config(out.spec, m);
    pt.config = family.canonical_config(out.spec, options.config.empty() ? pt.default_config : options.config);
    CUdeviceptr y = d_y.ptr(), xp = d_x.ptr();
    CUdeviceptr b = spec.epilogue == gemm::Epilogue::kBias ? d_b.ptr() : 0;
    CUdeviceptr r = spec.epilogue == gemm::Epilogue::kResidual ? d_r.ptr() : 0;
    float global_scale = w.global_scale;
    int m_arg = int(m);
    auto runner = [&](const std::string& config_text) {
      const gemm::Config config = gemm::Config::parse(spec, config_text);
      const LoadedKernel* kernel =
          &ModuleTable::get().load(jit.get(CompileRequest::make(family, out.spec, config_text, arch)).binary);
      const LaunchGeometry g = gemm::geometry(spec, config, m);
      return [&, kernel, g](int i) {
        const DeviceWeight& cw = dw[size_t(i) % dw.size()];
        CUdeviceptr q = cw.q.ptr(), s = w.scales.empty() ? 0 : cw.s.ptr(), z = w.zeros.empty() ? 0 : cw.z.ptr();
        CUdeviceptr p = w.perm.empty() ? 0 : cw.p.ptr();
        void* args[] = {&y, &xp, &q, &s, &z, &p, &global_scale, &b, &r, &m_arg};
        launch(*kernel, g, nullptr, args);
      };
    };
    if (options.sweep) {
      // Candidates whose token tile is the bucket's: compile them all at once, time each briefly.
      std::vector<CompileRequest> reqs;
      // gemv candidates with the bucket's token tile, or every mma candidate.
      const gemm::Config def = gemm::Config::parse(spec, pt.default_config);
      for (const auto& c : family.candidate_configs(out.spec)) {
        const gemm::Config cand = gemm::Config::parse(spec, c);
        const bool same = cand.strategy == def.strategy && (def.strategy == gemm::Strategy::kMma || cand.mt == def.mt);
        if (same) reqs.push_back(CompileRequest::make(family, out.spec, c, arch));
      }
      jit.get_all(reqs, options.jobs, Parallelism::kThreads);
      const MeasureOptions quick{3, 10, 3, 10, 50};
      double best = INFINITY;
      for (const auto& req : reqs) {
        const double us = measure(runner(req.config), quick).median_us;
        if (us < best) best = us, pt.config = req.config;
      }
      pt.candidates = int(reqs.size());
      pt.default_us = measure(runner(pt.default_config)).median_us;
    }
    auto run = runner(pt.config);
    pt.ours = measure(run);
    pt.weight_bytes = double(w.bytes());
    pt.weight_gbps = pt.weight_bytes / (pt.ours.median_us * 1e-6) / 1e9;
    pt.pct_copy = 100.0 * pt.weight_gbps / out.copy_gbps;
    pt.tflops = 2.0 * double(m) * double(spec.n) * double(spec.k) / (pt.ours.median_us * 1e-6) / 1e12;
    if (peer) {
      const float alpha = 1.f, beta = 0.f;
      auto run_cublas = [&](int i) {
        const DeviceBuffer& wb = w16[size_t(i) % w16.size()];
        cublas->check(cublas->cublasGemmEx(handle, kOpT, kOpN, int(spec.n), int(m), int(spec.k), &alpha,
                                           reinterpret_cast<const void*>(wb.ptr()), kR16F, int(spec.k),
                                           reinterpret_cast<const void*>(d_x.ptr()), kR16F, int(spec.k), &beta,
                                           reinterpret_cast<void*>(d_y16.ptr()), kR16F, int(spec.n), kCompute32F, kGemmDefault),
                      "cublasGemmEx", "running the fp16 peer");
      };
      pt.cublas_us = measure(run_cublas).median_us;
      pt.speedup_vs_cublas = pt.cublas_us / pt.ours.median_us;
      // Same inputs, first weight copy, both results.
      run(0);
      run_cublas(0);
      d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "comparing with cuBLAS");
      std::vector<uint16_t> ours(size_t(m * n_out)), theirs(size_t(m * n_out));
      d_y.download(ours.data(), ours.size() * 2);
      d_y16.download(theirs.data(), theirs.size() * 2);
      pt.error_vs_cublas = norm_error(ours, theirs);
    }
    out.points.push_back(pt);
  }
  if (handle) cublas->cublasDestroy(handle);
  return out;
}

}  // namespace onecat
