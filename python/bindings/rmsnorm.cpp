// rmsnorm bindings: out = rmsnorm(x [+ residual]) · weight over the last dimension, with the
// fused residual add writing residual <- x + residual in place (codegen/rmsnorm).
#include <climits>
#include <memory>
#include <unordered_map>

#include "base/error.h"
#include "codegen/rmsnorm/emit.h"
#include "codegen/rmsnorm/op.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/runtime.h"
#include "runtime/engine/prepared_op.h"

namespace onecat::python {
namespace {

constexpr const char* kOp = "onecat.rmsnorm";

std::string spec_for(int64_t hidden, bool residual) {
  const std::string text = "rmsnorm:hidden=" + std::to_string(hidden) + ",dtype=f16,residual=" + (residual ? "1" : "0");
  try {
    return rmsnorm::Spec::parse(text).to_string();
  } catch (const InputError& e) {
    throw py::value_error(std::string(kOp) + ": x's last dimension " + std::to_string(hidden) + " has no kernel: " + e.what());
  }
}

ArrayView half_cuda(py::handle obj, const char* name, int device) {
  const Arg arg{kOp, name};
  ArrayView v = view_of(obj, arg);
  require_cuda(v, arg);
  require_dtype(v, DType::kFloat16, arg);
  require_contiguous(v, arg);
  require_same_device(v, device, arg);
  return v;
}

using RmsnormOp = PreparedOp<rmsnorm::Spec, rmsnorm::Config, rmsnorm::Args>;

// One (hidden, residual) shape: its canonical spec, made and checked on the shape's first call
// (so a shape without a kernel is reported before any driver call, as every bad argument is),
// and its prepared op, made on the first call that reaches the GPU. Later calls find it by
// those two numbers and build no text (ARCHITECTURE.md rule 4).
struct Prepared {
  std::string spec;
  std::unique_ptr<RmsnormOp> op;
};

Prepared& prepared(int64_t hidden, bool residual) {
  static auto* table = new std::unordered_map<int64_t, Prepared>();  // never destroyed, like the Session
  const int64_t key = hidden * 2 + (residual ? 1 : 0);
  if (auto it = table->find(key); it != table->end()) return it->second;
  Prepared p{spec_for(hidden, residual), nullptr};  // throws for a shape without a kernel
  return table->emplace(key, std::move(p)).first->second;
}

// kernel_spec/config: set when a compiled kernel (onecat.compile) is called; empty to dispatch.
void rmsnorm_op(py::handle out, py::handle x, py::handle weight, double eps, py::handle residual, uintptr_t stream,
                const std::string& kernel_spec, const std::string& config) {
  ArrayView xv = half_cuda(x, "x", -1);
  if (xv.shape.empty()) throw py::value_error(std::string(kOp) + ": x must have at least 1 dimension, got a scalar");
  const int64_t hidden = xv.shape.back();
  ArrayView wv = half_cuda(weight, "weight", xv.device);
  require_shape(wv, {hidden}, {kOp, "weight"});
  const bool has_residual = !residual.is_none();
  ArrayView rv;
  if (has_residual) {
    rv = half_cuda(residual, "residual", xv.device);
    require_shape(rv, xv.shape, {kOp, "residual"});
  }
  ArrayView ov = half_cuda(out, "out", xv.device);
  require_shape(ov, xv.shape, {kOp, "out"});

  Prepared& p = prepared(hidden, has_residual);
  if (!kernel_spec.empty() && kernel_spec != p.spec) {
    throw py::value_error(std::string(kOp) + ": this kernel is " + kernel_spec + " but the arguments need " + p.spec);
  }
  const int64_t rows = hidden ? xv.numel() / hidden : 0;
  if (rows > INT_MAX) throw py::value_error(std::string(kOp) + ": x has " + std::to_string(rows) + " rows, more than 2^31 - 1");

  const int device = resolve_devices({{&xv, {kOp, "x"}}, {&wv, {kOp, "weight"}}, {&ov, {kOp, "out"}},
                                      {has_residual ? &rv : nullptr, {kOp, "residual"}}});
  Runtime& rt = Runtime::get();
  rt.use_gpu(device);
  if (rows == 0) return;
  const rmsnorm::Args a{ov.data, xv.data, has_residual ? rv.data : 0, wv.data, float(eps), rows};
  auto check_alignment = [&](const rmsnorm::Config& c) {
    const int align = rmsnorm::pointer_alignment(c);
    require_aligned(xv, align, {kOp, "x"});
    require_aligned(wv, align, {kOp, "weight"});
    require_aligned(ov, align, {kOp, "out"});
    if (has_residual) require_aligned(rv, align, {kOp, "residual"});
  };
  if (config.empty()) {
    if (!p.op) p.op = std::make_unique<RmsnormOp>(rt, p.spec);
    check_alignment(p.op->config(rows));
    p.op->launch(a, rows, as_stream(stream));
    return;
  }
  // A compiled kernel (onecat.compile) with its own config: not the dispatched hot path.
  const LoadedKernel& kernel = rt.kernel_with_config(p.spec, config);
  const rmsnorm::Spec s = rmsnorm::Spec::parse(p.spec);
  const rmsnorm::Config c = rmsnorm::Config::parse(s, config);
  check_alignment(c);
  launch(kernel, rmsnorm::make_call(s, c, a), as_stream(stream));
}

}  // namespace

void bind_rmsnorm(py::module_& m) {
  m.def("rmsnorm_spec", &spec_for, py::arg("hidden"), py::arg("residual"));
  m.def("rmsnorm", &rmsnorm_op, py::arg("out"), py::arg("x"), py::arg("weight"), py::arg("eps"), py::arg("residual"),
        py::arg("stream"), py::arg("kernel_spec") = "", py::arg("config") = "");
}

}  // namespace onecat::python
