// moe bindings (codegen/moe, docs/moe.md): the routing — on the GPU, or for host logits the CPU
// reference (runtime/cpu/moe.h) — and a whole mixture-of-experts layer on the GPU (route,
// gate_up, down, combine; for a few tokens in one op=decode launch, as the model's forward)
// over the experts' packed weights stacked once (MoeExperts).
#include "runtime/cpu/moe.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "codegen/moe/emit.h"
#include "codegen/moe/experts.h"
#include "codegen/moe/op.h"
#include "codegen/moe/space.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/packed_weight.h"
#include "python/bindings/prepared.h"
#include "python/bindings/runtime.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/dispatch.h"

namespace onecat::python {
namespace {

constexpr const char* kRoute = "onecat.moe_route";
constexpr const char* kMoe = "onecat.moe";
constexpr const char* kExperts = "onecat.MoeExperts";

using Shape = PreparedShape<moe::Spec, moe::Config, moe::Args>;

// The route kernel over several CTAs and the decode layer meet in a workspace
// (codegen/moe/op.h), kept with the shape: sized for the largest bucket so far and zeroed once
// when allocated (the kernels leave their counters at 0).
struct WorkspaceShape : Shape {
  ZeroedWorkspace workspace;
};

std::string checked(const std::string& text, const char* op) {
  try {
    return moe::Spec::parse(text).to_string();
  } catch (const InputError& e) {
    throw py::value_error(std::string(op) + ": " + e.what());
  }
}

// The router's spec fields beyond softmax (codegen/moe/spec.h); topk_groups < 0: all groups.
struct Router {
  std::string score = "softmax";
  bool bias = false;
  int64_t groups = 1, topk_groups = -1;
  double scale = 1.0;
};

std::string route_spec_of(int64_t experts, int64_t topk, bool norm, const Router& r) {
  std::string text = "moe:op=route,experts=" + std::to_string(experts) + ",topk=" + std::to_string(topk) +
                     ",norm=" + (norm ? "1" : "0") + ",score=" + r.score;
  if (r.bias) text += ",bias=1";
  if (r.groups != 1) text += ",groups=" + std::to_string(r.groups);
  if (r.topk_groups >= 0) text += ",topk_groups=" + std::to_string(r.topk_groups);
  return checked(text, kRoute);
}

// Found by its numbers: a later call builds and parses no text. A score other than softmax or
// sigmoid keys as 2, whose spec (made from the text given) is refused before anything is kept.
WorkspaceShape& route_shape(int64_t experts, int64_t topk, bool norm, const Router& r) {
  using Key = std::array<int64_t, 7>;
  static auto* table = new std::map<Key, WorkspaceShape>();  // never destroyed, like the Session
  const int64_t score = r.score == "softmax" ? 0 : r.score == "sigmoid" ? 1 : 2;
  const Key key{experts, topk, norm ? 1 : 0, score, r.bias ? 1 : 0, r.groups, r.topk_groups};
  return prepared_shape(*table, key, [&] { return route_spec_of(experts, topk, norm, r); });
}

void launch_on(Shape& shape, const moe::Args& a, int64_t m, CUstream stream) {
  const Shape::Chosen k = shape.choose(m, "");
  launch(*k.kernel, moe::make_call(k.spec, k.config, a), stream);
}

// A route or decode launch with room in the shape's workspace for m's whole bucket (so a CUDA
// graph captured after a first call never grows it).
void launch_with_workspace(WorkspaceShape& shape, moe::Args a, int64_t m, CUstream stream) {
  const Shape::Chosen k = shape.choose(m, "");
  const int64_t cap = std::max<int64_t>(m, int64_t(1) << Dispatcher::bucket_index(m));
  const int64_t bytes = moe::workspace_bytes(k.spec, k.config, cap);
  shape.workspace.reserve(bytes, Runtime::get().ordinal(), "moe workspace");
  a.workspace = bytes > 0 ? shape.workspace.buffer.ptr() : 0;
  launch(*k.kernel, moe::make_call(k.spec, k.config, a), stream);
}

// logits [tokens, experts] fp16 → ids, weights [tokens, topk], offsets [experts + 1], sorted
// [tokens·topk], all on logits' GPU.
void moe_route_op(py::handle ids, py::handle weights, py::handle offsets, py::handle sorted, py::handle logits,
                  int64_t topk, bool norm, const std::string& score, py::object bias, int64_t groups,
                  int64_t topk_groups, double scale, uintptr_t stream) {
  ArrayView lv = cuda_array(logits, DType::kFloat16, 2, {kRoute, "logits"}, -1);
  const int64_t tokens = lv.shape[0], experts = lv.shape[1];
  const Router router{score, !bias.is_none(), groups, topk_groups, scale};
  WorkspaceShape& shape = route_shape(experts, topk, norm, router);
  ArrayView iv = cuda_array(ids, DType::kInt32, 2, {kRoute, "ids"}, lv.device);
  ArrayView wv = cuda_array(weights, DType::kFloat32, 2, {kRoute, "weights"}, lv.device);
  ArrayView ov = cuda_array(offsets, DType::kInt32, 1, {kRoute, "offsets"}, lv.device);
  ArrayView sv = cuda_array(sorted, DType::kInt32, 1, {kRoute, "sorted"}, lv.device);
  require_shape(iv, {tokens, topk}, {kRoute, "ids"});
  require_shape(wv, {tokens, topk}, {kRoute, "weights"});
  require_shape(ov, {experts + 1}, {kRoute, "offsets"});
  require_shape(sv, {tokens * topk}, {kRoute, "sorted"});
  ArrayView bv;
  if (router.bias) {
    bv = cuda_array(bias, DType::kFloat32, 1, {kRoute, "bias"}, lv.device);
    require_shape(bv, {experts}, {kRoute, "bias"});
  }
  if (tokens * topk > INT_MAX) throw py::value_error(std::string(kRoute) + ": more than 2^31 - 1 (token, slot) pairs");
  const int device = resolve_devices({{&lv, {kRoute, "logits"}}, {&iv, {kRoute, "ids"}}, {&wv, {kRoute, "weights"}},
                                      {&ov, {kRoute, "offsets"}}, {&sv, {kRoute, "sorted"}},
                                      {router.bias ? &bv : nullptr, {kRoute, "bias"}}});
  Runtime::get().use_gpu(device);
  if (tokens == 0) return;
  moe::Args a;
  a.tokens = tokens, a.logits = lv.data, a.ids = iv.data, a.weights = wv.data, a.offsets = ov.data, a.sorted = sv.data;
  a.bias = router.bias ? bv.data : 0, a.scale = float(scale);
  launch_with_workspace(shape, a, tokens, as_stream(stream));
}

// The CPU reference on host logits (and bias): (ids, weights, offsets, sorted) as bytes (int32,
// float32, int32, int32); the Python side shapes them.
py::tuple moe_route_cpu(py::handle logits, int64_t topk, bool norm, const std::string& score, py::object bias,
                        int64_t groups, int64_t topk_groups, double scale) {
  const Arg arg{kRoute, "logits"};
  ArrayView lv = view_of(logits, arg);
  require_host(lv, arg);
  require_dtype(lv, DType::kFloat16, arg);
  require_contiguous(lv, arg);
  require_ndim(lv, 2, arg);
  const int64_t tokens = lv.shape[0], experts = lv.shape[1];
  const Router router{score, !bias.is_none(), groups, topk_groups, scale};
  const moe::Spec spec = moe::Spec::parse(route_spec_of(experts, topk, norm, router));  // the GPU's refusals
  cpu::MoeRouter q;
  q.experts = int(experts), q.topk = int(topk), q.norm = norm, q.sigmoid = spec.sigmoid;
  q.groups = spec.groups, q.topk_groups = spec.topk_groups, q.scale = float(scale);
  if (router.bias) {
    const Arg barg{kRoute, "bias"};
    ArrayView bv = view_of(bias, barg);
    require_host(bv, barg);
    require_dtype(bv, DType::kFloat32, barg);
    require_contiguous(bv, barg);
    require_shape(bv, {experts}, barg);
    q.bias = reinterpret_cast<const float*>(bv.data);
  }
  const cpu::MoeRoute r = cpu::moe_route(reinterpret_cast<const uint16_t*>(lv.data), tokens, q);
  auto bytes = [](const auto& v) { return py::bytes(reinterpret_cast<const char*>(v.data()), v.size() * 4); };
  return py::make_tuple(bytes(r.ids), bytes(r.weights), bytes(r.offsets), bytes(r.sorted));
}

// One projection of every expert as the moe kernels read it (codegen/moe/experts.h), on the
// host and, once uploaded, on one GPU.
struct ExpertStack {
  moe::StackedExperts host;
  std::string fields;  // ",fmt=…,group=…,act_order=…"
  DeviceBuffer d_qweight, d_scales, d_zeros, d_perm, d_global;

  void upload() {
    auto put = [](DeviceBuffer& b, const void* data, size_t bytes) {
      b = DeviceBuffer(std::max<size_t>(bytes, 16));
      if (bytes > 0) b.upload(data, bytes);
    };
    put(d_qweight, host.qweight.data(), host.qweight.size());
    put(d_scales, host.scales.data(), host.scales.size());
    put(d_zeros, host.zeros.data(), host.zeros.size());
    put(d_perm, host.perm.data(), host.perm.size() * 4);
    put(d_global, host.global_scales.data(), host.global_scales.size() * 4);
  }
  moe::ExpertWeights weights() const {
    return {d_qweight.ptr(), d_scales.ptr(),      d_zeros.ptr(),      d_perm.ptr(),
            d_global.ptr(),  host.qweight_stride, host.scales_stride, host.zeros_stride};
  }
};

ExpertStack stack(const std::vector<PyPackedWeight*>& ws, const char* name) {
  std::vector<const quant::PackedWeight*> weights;
  for (const PyPackedWeight* w : ws) weights.push_back(&w->host);
  ExpertStack s;
  try {
    s.host = moe::stack_experts(weights, [&](size_t e) { return std::string(name) + "[" + std::to_string(e) + "]"; });
  } catch (const InputError& e) {
    throw py::value_error(std::string(kExperts) + ": " + e.what());
  }
  s.fields = moe::weight_fields(*weights.front());
  return s;
}

// Experts stacked once; uploaded to one GPU on the first layer call; the layer's ops and
// scratch (routing, h, y) per top-k and norm, grown to the largest call so far.
struct PyMoeExperts {
  int64_t experts = 0, hidden = 0, inter = 0;
  ExpertStack gate_up, down;
  int device = -1;
  struct Ops {
    WorkspaceShape route;
    Shape gate_up, down, combine;
    WorkspaceShape decode;   // its spec empty where unused (codegen/moe/space.h decode_layer_tokens)
    int64_t decode_max = 0;  // tokens up to which the layer is one op=decode launch
  };
  std::map<std::pair<int64_t, bool>, Ops> ops;
  DeviceBuffer ids, weights, offsets, sorted, h, y;
  int64_t scratch_tokens = 0, scratch_topk = 0;

  Ops& ops_for(int64_t topk, bool norm) {
    auto it = ops.find({topk, norm});
    if (it != ops.end()) return it->second;
    Ops o;
    o.route.spec = route_spec_of(experts, topk, norm, Router{});
    o.gate_up.spec = checked(moe::projection_spec(moe::Op::kGateUp, experts, topk, hidden, inter, gate_up.fields), kMoe);
    o.down.spec = checked(moe::projection_spec(moe::Op::kDown, experts, topk, hidden, inter, down.fields), kMoe);
    o.combine.spec = checked("moe:op=combine,topk=" + std::to_string(topk) + ",hidden=" + std::to_string(hidden), kMoe);
    if (gate_up.fields == down.fields) {
      o.decode.spec = checked("moe:op=decode,experts=" + std::to_string(experts) + ",topk=" + std::to_string(topk) +
                                  ",norm=" + (norm ? "1" : "0") + ",hidden=" + std::to_string(hidden) +
                                  ",inter=" + std::to_string(inter) + gate_up.fields,
                              kMoe);
      o.decode_max = moe::decode_layer_tokens(moe::Spec::parse(o.decode.spec));
      if (o.decode_max < 1) o.decode.spec.clear();
    }
    return ops.emplace(std::make_pair(topk, norm), std::move(o)).first->second;
  }

  // Room for `tokens` tokens at `topk`; growing waits for the GPU (no launch still uses them).
  void reserve(int64_t tokens, int64_t topk) {
    if (tokens <= scratch_tokens && topk <= scratch_topk) return;
    Driver& d = *Driver::find();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "growing a MoE layer's scratch");
    scratch_tokens = std::max(tokens, scratch_tokens), scratch_topk = std::max(topk, scratch_topk);
    const size_t pairs = size_t(scratch_tokens * scratch_topk);
    ids = DeviceBuffer(pairs * 4), weights = DeviceBuffer(pairs * 4), sorted = DeviceBuffer(pairs * 4);
    offsets = DeviceBuffer(size_t(experts + 1) * 4);
    h = DeviceBuffer(pairs * size_t(inter) * 2), y = DeviceBuffer(pairs * size_t(hidden) * 4);
  }
};

std::unique_ptr<PyMoeExperts> make_experts(const std::vector<PyPackedWeight*>& gate_up,
                                           const std::vector<PyPackedWeight*>& down) {
  if (gate_up.empty() || gate_up.size() != down.size()) {
    throw py::value_error(std::string(kExperts) + ": gate_up and down need one weight per expert each (got " +
                          std::to_string(gate_up.size()) + " and " + std::to_string(down.size()) + ")");
  }
  for (const auto* list : {&gate_up, &down}) {
    for (const PyPackedWeight* w : *list) {
      if (w == nullptr) throw py::type_error(std::string(kExperts) + ": every expert weight must be a PackedWeight");
    }
  }
  auto e = std::make_unique<PyMoeExperts>();
  e->gate_up = stack(gate_up, "gate_up");
  e->down = stack(down, "down");
  const quant::PackedWeight& g = gate_up.front()->host;
  const quant::PackedWeight& d = down.front()->host;
  if (g.n % 2 != 0 || d.k != g.n / 2 || d.n != g.k) {
    throw py::value_error(std::string(kExperts) + ": gate_up is " + std::to_string(g.n) + "×" + std::to_string(g.k) +
                          " and down " + std::to_string(d.n) + "×" + std::to_string(d.k) +
                          "; they must be [2·inter, hidden] (gate rows, then up rows) and [hidden, inter]");
  }
  e->experts = int64_t(gate_up.size()), e->hidden = g.k, e->inter = g.n / 2;
  e->ops_for(1, false);  // the shapes' refusals (sizes, formats) now rather than on the first call
  return e;
}

// out [tokens, hidden] = the MoE layer of x [tokens, hidden] routed by logits [tokens, experts].
void moe_op(py::handle out, py::handle x, py::handle logits, PyMoeExperts& e, int64_t topk, bool norm,
            uintptr_t stream) {
  ArrayView xv = cuda_array(x, DType::kFloat16, 2, {kMoe, "x"}, -1);
  ArrayView lv = cuda_array(logits, DType::kFloat16, 2, {kMoe, "logits"}, xv.device);
  ArrayView ov = cuda_array(out, DType::kFloat16, 2, {kMoe, "out"}, xv.device);
  const int64_t tokens = xv.shape[0];
  require_shape(xv, {tokens, e.hidden}, {kMoe, "x"});
  require_shape(lv, {tokens, e.experts}, {kMoe, "logits"});
  require_shape(ov, {tokens, e.hidden}, {kMoe, "out"});
  PyMoeExperts::Ops& ops = e.ops_for(topk, norm);
  require_aligned(xv, 16, {kMoe, "x"});
  if (tokens * topk > INT_MAX) throw py::value_error(std::string(kMoe) + ": more than 2^31 - 1 (token, slot) pairs");
  const int device = resolve_devices({{&xv, {kMoe, "x"}}, {&lv, {kMoe, "logits"}}, {&ov, {kMoe, "out"}}});
  if (e.device >= 0 && e.device != device) {
    throw py::value_error(std::string(kMoe) + ": these experts are on GPU " + std::to_string(e.device) +
                          ", the arrays on GPU " + std::to_string(device));
  }
  Runtime::get().use_gpu(device);
  if (e.device < 0) {
    e.gate_up.upload();
    e.down.upload();
    e.device = device;
  }
  if (tokens == 0) return;
  e.reserve(tokens, topk);
  const CUstream s = as_stream(stream);
  moe::Args a;
  a.tokens = tokens, a.logits = lv.data, a.ids = e.ids.ptr(), a.weights = e.weights.ptr(), a.offsets = e.offsets.ptr();
  a.sorted = e.sorted.ptr(), a.x = xv.data, a.h = e.h.ptr(), a.y = e.y.ptr(), a.out = ov.data;
  if (tokens <= ops.decode_max) {  // the whole layer in one launch
    a.experts = e.gate_up.weights(), a.down = e.down.weights();
    launch_with_workspace(ops.decode, a, tokens, s);
    return;
  }
  launch_with_workspace(ops.route, a, tokens, s);
  for (auto [stack, shape] : {std::pair{&e.gate_up, &ops.gate_up}, std::pair{&e.down, &ops.down}}) {
    a.experts = stack->weights(), a.slot = 0;
    launch_on(*shape, a, tokens, s);
  }
  launch_on(ops.combine, a, tokens, s);
}

}  // namespace

void bind_moe(py::module_& m) {
  m.def(
      "moe_route_spec",
      [](int64_t experts, int64_t topk, bool norm, const std::string& score, bool bias, int64_t groups,
         int64_t topk_groups) { return route_spec_of(experts, topk, norm, Router{score, bias, groups, topk_groups}); },
      py::arg("experts"), py::arg("topk"), py::arg("norm"), py::arg("score"), py::arg("bias"), py::arg("groups"),
      py::arg("topk_groups"));
  m.def("moe_route", &moe_route_op, py::arg("ids"), py::arg("weights"), py::arg("offsets"), py::arg("sorted"),
        py::arg("logits"), py::arg("topk"), py::arg("norm"), py::arg("score"), py::arg("bias"), py::arg("groups"),
        py::arg("topk_groups"), py::arg("scale"), py::arg("stream"));
  m.def("moe_route_cpu", &moe_route_cpu, py::arg("logits"), py::arg("topk"), py::arg("norm"), py::arg("score"),
        py::arg("bias"), py::arg("groups"), py::arg("topk_groups"), py::arg("scale"));
  py::class_<PyMoeExperts>(m, "MoeExperts")
      .def_readonly("experts", &PyMoeExperts::experts)
      .def_readonly("hidden", &PyMoeExperts::hidden)
      .def_readonly("inter", &PyMoeExperts::inter)
      .def("specs", [](PyMoeExperts& e, int64_t topk, bool norm) {
        PyMoeExperts::Ops& o = e.ops_for(topk, norm);
        std::vector<std::string> out{o.route.spec, o.gate_up.spec, o.down.spec, o.combine.spec};
        if (!o.decode.spec.empty()) out.push_back(o.decode.spec);
        return out;
      }, py::arg("topk"), py::arg("norm"));
  m.def("moe_experts", &make_experts, py::arg("gate_up"), py::arg("down"));
  m.def("moe", &moe_op, py::arg("out"), py::arg("x"), py::arg("logits"), py::arg("experts"), py::arg("topk"),
        py::arg("norm"), py::arg("stream"));
}

}  // namespace onecat::python
