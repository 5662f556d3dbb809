// gemm bindings: checkpoint tensors → PackedWeight (models/quant/pack.h, on the host, then
// uploaded once), and y = epilogue(x · Wᵀ) dispatched for x's M bucket (codegen/gemm).
#include "runtime/cpu/gemm.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <memory>
#include <optional>
#include <span>

#include "base/error.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/op.h"
#include "models/quant/pack.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/packed_weight.h"
#include "python/bindings/runtime.h"
#include "runtime/engine/dispatch.h"
#include "runtime/engine/prepared_op.h"

namespace onecat::python {
namespace {

constexpr const char* kPack = "onecat.pack_weight";
// Every gemm strategy loads x and the weights in 16-byte chunks (docs/gemm.md).
constexpr int kGemmAlignment = 16;

template <class T>
std::span<const T> host_span(const ArrayView& v) {
  return {reinterpret_cast<const T*>(v.data), size_t(v.numel())};
}

ArrayView host_array(py::handle obj, const char* name, std::initializer_list<DType> dtypes, const char* dtype_text) {
  const Arg arg{kPack, name};
  ArrayView v = view_of(obj, arg);
  require_host(v, arg);
  require_dtype_size(v, dtypes, dtype_text, arg);
  require_contiguous(v, arg);
  return v;
}

ArrayView host_matrix(py::handle obj, const char* name, std::initializer_list<DType> dtypes, const char* dtype_text) {
  ArrayView v = host_array(obj, name, dtypes, dtype_text);
  require_ndim(v, 2, {kPack, name});
  return v;
}

constexpr auto kInt32 = {DType::kInt32, DType::kUInt32};
constexpr auto kBytes = {DType::kUInt8, DType::kInt8, DType::kFloat8};

// K / groups, when it divides.
int group_of(int64_t k, int64_t groups, const char* scales_name) {
  if (groups <= 0 || k % groups != 0) {
    throw py::value_error(std::string(kPack) + ": " + scales_name + " has " + std::to_string(groups) +
                          " rows of groups, which does not divide K=" + std::to_string(k));
  }
  return int(k / groups);
}

std::unique_ptr<PyPackedWeight> wrap(quant::PackedWeight w, int device) {
  auto p = std::make_unique<PyPackedWeight>();
  p->host = std::move(w);
  if (device >= 0) p->to_device(device);
  return p;
}

std::unique_ptr<PyPackedWeight> pack_f16(py::handle weight, int device) {
  const ArrayView w = host_matrix(weight, "weight", {DType::kFloat16}, "float16");
  return wrap(quant::pack_f16(w.shape[0], w.shape[1], host_span<uint16_t>(w)), device);
}

std::unique_ptr<PyPackedWeight> pack_awq4(py::handle qweight, py::handle qzeros, py::handle scales, int device) {
  const ArrayView q = host_matrix(qweight, "qweight", kInt32, "int32");
  const ArrayView z = host_matrix(qzeros, "qzeros", kInt32, "int32");
  const ArrayView s = host_matrix(scales, "scales", {DType::kFloat16}, "float16");
  const int64_t k = q.shape[0], n = s.shape[1];
  return wrap(quant::pack_awq4(n, k, group_of(k, s.shape[0], "scales"), host_span<int32_t>(q), host_span<int32_t>(z),
                               host_span<uint16_t>(s)),
              device);
}

std::unique_ptr<PyPackedWeight> pack_gptq4(py::handle qweight, py::handle qzeros, py::handle scales, py::handle g_idx,
                                           int device) {
  const ArrayView q = host_matrix(qweight, "qweight", kInt32, "int32");
  const ArrayView s = host_matrix(scales, "scales", {DType::kFloat16}, "float16");
  std::optional<ArrayView> z;
  if (!qzeros.is_none()) z = host_matrix(qzeros, "qzeros", kInt32, "int32");
  const int64_t k = 8 * q.shape[0], n = q.shape[1];
  std::vector<int32_t> gidx;
  if (!g_idx.is_none()) {
    const ArrayView g = host_array(g_idx, "g_idx", {DType::kInt32, DType::kInt64}, "int32 or int64");
    require_ndim(g, 1, {kPack, "g_idx"});
    gidx.resize(size_t(g.numel()));
    for (size_t i = 0; i < gidx.size(); ++i) {
      gidx[i] = g.dtype == DType::kInt32 ? reinterpret_cast<const int32_t*>(g.data)[i]
                                         : int32_t(reinterpret_cast<const int64_t*>(g.data)[i]);
    }
  }
  return wrap(quant::pack_gptq4(n, k, group_of(k, s.shape[0], "scales"), host_span<int32_t>(q),
                                z ? host_span<int32_t>(*z) : std::span<const int32_t>{}, host_span<uint16_t>(s), gidx),
              device);
}

std::unique_ptr<PyPackedWeight> pack_fp8b32(py::handle weight, py::handle scales, int device) {
  const ArrayView w = host_matrix(weight, "weight", kBytes, "uint8 or float8_e4m3fn (E4M3 bytes)");
  const ArrayView s = host_matrix(scales, "scales", {DType::kUInt8, DType::kFloat8, DType::kFloat32},
                                  "uint8 / float8_e8m0fnu (UE8M0 bytes) or float32");
  const int64_t n = w.shape[0], k = w.shape[1];
  if (s.dtype == DType::kFloat32) return wrap(quant::pack_fp8b32(n, k, host_span<uint8_t>(w), host_span<float>(s)), device);
  return wrap(quant::pack_fp8b32(n, k, host_span<uint8_t>(w), host_span<uint8_t>(s)), device);
}

std::unique_ptr<PyPackedWeight> pack_fp8b128(py::handle weight, py::handle weight_scale_inv, int device) {
  const ArrayView w = host_matrix(weight, "weight", kBytes, "uint8 or float8_e4m3fn (E4M3 bytes)");
  const ArrayView s = host_array(weight_scale_inv, "weight_scale_inv", {DType::kFloat32}, "float32");
  const int64_t n = w.shape[0], k = w.shape[1];
  const Dims blocks{(n + 127) / 128, (k + 127) / 128};
  // Per-channel scales come as [N] or [N, 1]; [⌈N/128⌉, ⌈K/128⌉] are blocks.
  const bool per_channel = s.shape.size() == 1 || (s.shape != blocks && s.shape == Dims{n, 1});
  return wrap(quant::pack_fp8b128(n, k, host_span<uint8_t>(w), host_span<float>(s),
                                  per_channel ? quant::Fp8Scales::kPerChannel : quant::Fp8Scales::kBlock128),
              device);
}

std::unique_ptr<PyPackedWeight> pack_nvfp4(py::handle weight, py::handle weight_scale, py::handle weight_scale_2, int device) {
  const ArrayView w = host_matrix(weight, "weight", {DType::kUInt8, DType::kInt8}, "uint8 (two E2M1 codes a byte)");
  const ArrayView s = host_matrix(weight_scale, "weight_scale", kBytes, "uint8 or float8_e4m3fn (E4M3 bytes)");
  float global;
  if (py::isinstance<py::float_>(weight_scale_2) || py::isinstance<py::int_>(weight_scale_2)) {
    global = weight_scale_2.cast<float>();
  } else {
    const ArrayView g = host_array(weight_scale_2, "weight_scale_2", {DType::kFloat32}, "float32");
    if (g.numel() != 1) {
      throw py::value_error(std::string(kPack) + ": weight_scale_2 must hold one value, got shape " + g.shape_text());
    }
    global = host_span<float>(g)[0];
  }
  return wrap(quant::pack_nvfp4(w.shape[0], 2 * w.shape[1], host_span<uint8_t>(w), host_span<uint8_t>(s), global), device);
}

std::unique_ptr<PyPackedWeight> pack_mxfp4(py::handle blocks, py::handle scales, int device) {
  // gpt-oss stores blocks as [N][K/32][16]; the packer reads them as [N][K/2].
  const ArrayView b = host_array(blocks, "blocks", {DType::kUInt8, DType::kInt8}, "uint8 (two E2M1 codes a byte)");
  if (b.shape.size() != 2 && b.shape.size() != 3) {
    throw py::value_error(std::string(kPack) + ": blocks must be [N, K/2] or [N, K/32, 16], got shape " + b.shape_text());
  }
  const ArrayView s = host_matrix(scales, "scales", kBytes, "uint8 or float8_e8m0fnu (UE8M0 bytes)");
  const int64_t n = b.shape[0], k = 2 * (b.numel() / std::max<int64_t>(n, 1));
  return wrap(quant::pack_mxfp4(n, k, host_span<uint8_t>(b), host_span<uint8_t>(s)), device);
}

gemm::Epilogue parse_epilogue(const std::string& e) {
  if (e == "none") return gemm::Epilogue::kNone;
  if (e == "bias") return gemm::Epilogue::kBias;
  if (e == "residual") return gemm::Epilogue::kResidual;
  if (e == "silu_mul") return gemm::Epilogue::kSiluMul;
  throw py::value_error(std::string(kGemm) + ": epilogue must be none, bias, residual or silu_mul, got '" + e + "'");
}

ArrayView cuda_array(py::handle obj, const char* name, int device) {
  const Arg arg{kGemm, name};
  ArrayView v = view_of(obj, arg);
  require_cuda(v, arg);
  require_contiguous(v, arg);
  require_same_device(v, device, arg);
  return v;
}

void gemm_op(py::handle y, py::handle x, PyPackedWeight& w, py::handle bias, py::handle residual,
             const std::string& epilogue, bool out_f32, uintptr_t stream, const std::string& kernel_spec,
             const std::string& config, py::handle norm_weight, float eps) {
  const bool norm = !norm_weight.is_none();
  if (norm && !(eps > 0.f && std::isfinite(eps))) {
    throw py::value_error(std::string(kGemm) + ": eps must be a positive finite number, got " + std::to_string(eps));
  }
  const gemm::Epilogue epi = parse_epilogue(epilogue);
  ArrayView xv = cuda_array(x, "x", -1);
  require_dtype(xv, DType::kFloat16, {kGemm, "x"});
  if (xv.shape.empty() || xv.shape.back() != w.host.k) {
    throw py::value_error(std::string(kGemm) + ": x must have K=" + std::to_string(w.host.k) +
                          " columns (its last dimension, the weight's in-features), got shape " + xv.shape_text());
  }
  if (w.device < 0) throw py::value_error(std::string(kGemm) + ": packed is on the host; call packed.cuda() first");
  if (xv.device >= 0 && xv.device != w.device) {
    throw py::value_error(std::string(kGemm) + ": x is on cuda:" + std::to_string(xv.device) + " but packed on cuda:" +
                          std::to_string(w.device));
  }
  PyPackedWeight::Prepared& p = w.prepared(epi, epilogue, out_f32, norm);
  if (!kernel_spec.empty() && kernel_spec != p.spec) {
    throw py::value_error(std::string(kGemm) + ": this kernel is " + kernel_spec + " but the arguments need " + p.spec);
  }
  // The spec's numbers, read without text: out_cols depends on the epilogue alone.
  gemm::Spec spec;
  spec.n = w.host.n, spec.k = w.host.k, spec.epilogue = epi, spec.out_f32 = out_f32;
  Dims out_shape = xv.shape;
  out_shape.back() = spec.out_cols();

  ArrayView yv = cuda_array(y, "out", w.device);
  require_dtype(yv, out_f32 ? DType::kFloat32 : DType::kFloat16, {kGemm, "out"});
  require_shape(yv, out_shape, {kGemm, "out"});
  ArrayView bv, rv;
  if (epi == gemm::Epilogue::kBias) {
    if (bias.is_none()) throw py::value_error(std::string(kGemm) + ": epilogue 'bias' needs bias");
    bv = cuda_array(bias, "bias", w.device);
    require_dtype(bv, DType::kFloat16, {kGemm, "bias"});
    require_shape(bv, {spec.out_cols()}, {kGemm, "bias"});
  } else if (!bias.is_none()) {
    throw py::value_error(std::string(kGemm) + ": bias is given but the epilogue is '" + epilogue + "'");
  }
  if (epi == gemm::Epilogue::kResidual) {
    if (residual.is_none()) throw py::value_error(std::string(kGemm) + ": epilogue 'residual' needs residual");
    rv = cuda_array(residual, "residual", w.device);
    require_dtype(rv, DType::kFloat16, {kGemm, "residual"});
    require_shape(rv, out_shape, {kGemm, "residual"});
  } else if (!residual.is_none()) {
    throw py::value_error(std::string(kGemm) + ": residual is given but the epilogue is '" + epilogue + "'");
  }
  ArrayView nv;
  if (norm) {
    nv = cuda_array(norm_weight, "norm_weight", w.device);
    require_dtype(nv, DType::kFloat16, {kGemm, "norm_weight"});
    require_shape(nv, {w.host.k}, {kGemm, "norm_weight"});
    require_aligned(nv, kGemmAlignment, {kGemm, "norm_weight"});
  }
  require_aligned(xv, kGemmAlignment, {kGemm, "x"});
  require_aligned(yv, kGemmAlignment, {kGemm, "out"});
  if (epi == gemm::Epilogue::kBias) require_aligned(bv, kGemmAlignment, {kGemm, "bias"});
  if (epi == gemm::Epilogue::kResidual) require_aligned(rv, kGemmAlignment, {kGemm, "residual"});
  const int64_t m = xv.numel() / w.host.k;
  if (m > INT_MAX) throw py::value_error(std::string(kGemm) + ": x has " + std::to_string(m) + " rows, more than 2^31 - 1");

  const int device = resolve_devices({{&xv, {kGemm, "x"}},
                                      {&yv, {kGemm, "out"}},
                                      {epi == gemm::Epilogue::kBias ? &bv : nullptr, {kGemm, "bias"}},
                                      {epi == gemm::Epilogue::kResidual ? &rv : nullptr, {kGemm, "residual"}},
                                      {norm ? &nv : nullptr, {kGemm, "norm_weight"}}});
  if (device >= 0 && device != w.device) {
    throw py::value_error(std::string(kGemm) + ": the arrays are on cuda:" + std::to_string(device) +
                          " but packed on cuda:" + std::to_string(w.device));
  }
  Runtime& rt = Runtime::get();
  rt.use_gpu(w.device);
  if (m == 0) return;
  const gemm::Spec* parsed;
  gemm::Config c;
  const LoadedKernel* kernel;
  if (config.empty()) {
    if (!p.op) p.op = std::make_unique<PyPackedWeight::GemmOp>(rt, p.spec);
    parsed = &p.op->spec(), c = p.op->config(m), kernel = &p.op->kernel(m);
  } else {  // a compiled kernel (onecat.compile) with its own config: not the dispatched hot path
    spec = gemm::Spec::parse(p.spec);
    parsed = &spec, c = gemm::Config::parse(spec, config), kernel = &rt.kernel_with_config(p.spec, config);
  }

  // Room for any token count of m's bucket, so later calls of the bucket (a CUDA graph
  // captured after a first call) never grow it.
  const int64_t cap = std::max<int64_t>(m, int64_t(1) << Dispatcher::bucket_index(m));
  const int64_t floats = gemm::workspace_floats(*parsed, c, m), ncounters = gemm::workspace_counters(*parsed, c, m);
  if (floats > 0) w.reserve_workspace(gemm::workspace_floats(*parsed, c, cap), gemm::workspace_counters(*parsed, c, cap));
  gemm::Args a;
  a.y = yv.data, a.x = xv.data, a.qweight = w.qweight.ptr(), a.scales = w.scales.ptr(), a.zeros = w.zeros.ptr();
  a.perm = w.perm.ptr(), a.global_scale = w.host.global_scale, a.bias = bv.data, a.residual = rv.data, a.m = m;
  a.norm_weight = nv.data, a.norm_eps = eps;
  a.partial = w.workspace.partial(floats), a.counters = w.workspace.counters(ncounters);
  if (gemm::scratch_bytes(*parsed, c, m) > 0) w.reserve_scratch(gemm::scratch_bytes(*parsed, c, cap));
  a.scratch = w.scratch.ptr();
  gemm::ready_for_launch(c);
  gemm::launch_op(*parsed, c, *kernel, a, as_stream(stream));
}

}  // namespace

void bind_gemm(py::module_& m) {
  py::class_<PyPackedWeight>(m, "PackedWeight")
      .def_property_readonly("fmt",
                             [](const PyPackedWeight& w) { return std::string(quant::format_name(w.host.format)); })
      .def_property_readonly("n", [](const PyPackedWeight& w) { return w.host.n; })
      .def_property_readonly("k", [](const PyPackedWeight& w) { return w.host.k; })
      .def_property_readonly("group", [](const PyPackedWeight& w) { return w.host.group; })
      .def_property_readonly("act_order", &PyPackedWeight::act_order)
      .def_property_readonly("global_scale", [](const PyPackedWeight& w) { return w.host.global_scale; })
      .def_property_readonly("nbytes", [](const PyPackedWeight& w) { return w.host.bytes(); })
      .def_property_readonly(
          "device", [](const PyPackedWeight& w) { return w.device < 0 ? py::object(py::none()) : py::int_(w.device); })
      .def("to_device", &PyPackedWeight::to_device, py::arg("device") = -1)
      .def("spec", &PyPackedWeight::spec, py::arg("epilogue") = "none", py::arg("out_f32") = false,
           py::arg("norm") = false)
      .def("dequantize", &PyPackedWeight::dequantize);
  m.def("pack_f16", &pack_f16, py::arg("weight"), py::arg("device") = -1);
  m.def("pack_awq4", &pack_awq4, py::arg("qweight"), py::arg("qzeros"), py::arg("scales"), py::arg("device") = -1);
  m.def("pack_gptq4", &pack_gptq4, py::arg("qweight"), py::arg("qzeros"), py::arg("scales"), py::arg("g_idx"),
        py::arg("device") = -1);
  m.def("pack_fp8b32", &pack_fp8b32, py::arg("weight"), py::arg("scales"), py::arg("device") = -1);
  m.def("pack_fp8b128", &pack_fp8b128, py::arg("weight"), py::arg("weight_scale_inv"), py::arg("device") = -1);
  m.def("pack_nvfp4", &pack_nvfp4, py::arg("weight"), py::arg("weight_scale"), py::arg("weight_scale_2"),
        py::arg("device") = -1);
  m.def("pack_mxfp4", &pack_mxfp4, py::arg("blocks"), py::arg("scales"), py::arg("device") = -1);
  m.def("gemm", &gemm_op, py::arg("out"), py::arg("x"), py::arg("packed"), py::arg("bias"), py::arg("residual"),
        py::arg("epilogue"), py::arg("out_f32"), py::arg("stream"), py::arg("kernel_spec") = "", py::arg("config") = "",
        py::arg("norm_weight") = py::none(), py::arg("eps") = 1e-6f);
}

}  // namespace onecat::python
