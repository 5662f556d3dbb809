// The Python PackedWeight (onecat.pack_weight): a weight in the kernel layout of its format on
// the host and, once uploaded, on one GPU, with the gemm ops of its shape. The gemm bindings
// make and call it; the moe bindings stack experts' weights from it.
#pragma once
#include <array>
#include <memory>
#include <string>

#include "base/error.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/op.h"
#include "codegen/gemm/spec.h"
#include "codegen/weight_format.h"
#include "python/bindings/families.h"
#include "python/bindings/runtime.h"
#include "runtime/cpu/gemm.h"
#include "runtime/engine/prepared_op.h"

namespace onecat::python {

inline constexpr const char* kGemm = "onecat.gemm";

struct PyPackedWeight {
  quant::PackedWeight host;
  int device = -1;
  DeviceBuffer qweight, scales, zeros, perm;
  // Split-K workspace of this weight's launches (codegen/gemm/emit.h), grown to the largest
  // launch so far. It serves one launch at a time: launches of one packed weight on two
  // streams must not overlap when their config splits K.
  SplitWorkspace workspace;
  // strategy=cublas's scratch (codegen/gemm/op.h), grown likewise; one launch at a time.
  DeviceBuffer scratch;

  bool act_order() const { return !host.perm.empty(); }

  // Per (epilogue, output type, norm=rms or not): the canonical spec, made on the first call with them, and
  // the prepared op, made on the first call that reaches the GPU; later calls index this
  // array and build no text (ARCHITECTURE.md rule 4).
  using GemmOp = PreparedOp<gemm::Spec, gemm::Config, gemm::Args>;
  struct Prepared {
    std::string spec;
    std::unique_ptr<GemmOp> op;
  };
  std::array<Prepared, 16> prepared_;
  Prepared& prepared(gemm::Epilogue epi, const std::string& epilogue, bool out_f32, bool norm) {
    Prepared& p = prepared_[size_t((int(epi) * 2 + (out_f32 ? 1 : 0)) * 2 + (norm ? 1 : 0))];
    if (p.spec.empty()) p.spec = spec(epilogue, out_f32, norm);
    return p;
  }

  // Room for `floats` partials and `ncounters` zeroed counters. Growing waits for the GPU
  // before (no launch in flight still uses the old buffers) and after (the counters are zero
  // before a launch on any stream).
  void reserve_workspace(int64_t floats, int64_t ncounters) {
    if (workspace.fits(floats, ncounters)) return;
    Driver& d = *Driver::find();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "growing a split-K workspace");
    workspace.reserve(floats, ncounters);
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "zeroing split-K counters");
  }

  // Room for `bytes` of strategy=cublas scratch, growing after the launches in flight.
  void reserve_scratch(int64_t bytes) {
    if (size_t(bytes) <= scratch.bytes()) return;
    Driver& d = *Driver::find();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "growing a gemm scratch buffer");
    scratch = DeviceBuffer(size_t(bytes));
  }

  void to_device(int ordinal) {
    Runtime& rt = Runtime::get();
    rt.use_gpu(ordinal);
    if (device >= 0) return;
    auto put = [](DeviceBuffer& b, const void* data, size_t bytes) {
      if (bytes == 0) return;
      b = DeviceBuffer(bytes);
      b.upload(data, bytes);
    };
    put(qweight, host.qweight.data(), host.qweight.size());
    put(scales, host.scales.data(), host.scales.size());
    put(zeros, host.zeros.data(), host.zeros.size());
    put(perm, host.perm.data(), host.perm.size() * sizeof(int32_t));
    device = rt.ordinal();
  }

  std::string spec(const std::string& epilogue, bool out_f32, bool norm = false) const {
    const std::string text = "gemm:n=" + std::to_string(host.n) + ",k=" + std::to_string(host.k) +
                             ",fmt=" + std::string(quant::format_name(host.format)) +
                             ",group=" + std::to_string(host.group) + ",out=" + (out_f32 ? "f32" : "f16") +
                             ",epi=" + epilogue + ",act_order=" + (act_order() ? "1" : "0") + (norm ? ",norm=rms" : "");
    try {
      return gemm::Spec::parse(text).to_string();
    } catch (const InputError& e) {
      throw py::value_error(std::string(kGemm) + ": " + e.what());
    }
  }

  // W[N][K] in the checkpoint's (original) column order, as float32 bytes (the Python side
  // wraps them in a NumPy array or a torch tensor, whichever is installed).
  py::bytes dequantize() const {
    const std::vector<float> w = cpu::dequantize(host);
    std::string out(w.size() * sizeof(float), '\0');
    float* dst = reinterpret_cast<float*>(out.data());
    const size_t k = size_t(host.k);
    for (size_t r = 0; r < size_t(host.n); ++r) {
      for (size_t c = 0; c < k; ++c) {
        const size_t orig = host.perm.empty() ? c : size_t(host.perm[c]);
        dst[r * k + orig] = w[r * k + c];
      }
    }
    return py::bytes(out);
  }
};

}  // namespace onecat::python
