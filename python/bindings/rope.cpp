// rope bindings: Qwen3's q/k RMSNorm (when q_norm/k_norm are given), NeoX rotary embedding, and
// K/V written dense or into attention's paged cache (codegen/rope, docs/rope.md); rope_table,
// transformers' inverse frequencies for the kernel to read (runtime/cpu/rope).
#include "runtime/cpu/rope.h"

#include <pybind11/stl.h>

#include <array>
#include <climits>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "codegen/rope/emit.h"
#include "codegen/rope/op.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/kv_cache.h"
#include "python/bindings/prepared.h"
#include "python/bindings/runtime.h"

namespace onecat::python {
namespace {

constexpr const char* kOp = "onecat.rope";
// Paged caches are written in chunks of up to 16 bytes, as attention's kernels read them.
constexpr int kCacheAlignment = 16;

std::string spec_for(int64_t heads, int64_t kv_heads, int64_t dim, bool qk_norm, int64_t page, const std::string& kv,
                     const std::string& kv_scale) {
  std::string text = "rope:heads=" + std::to_string(heads) + ",kv_heads=" + std::to_string(kv_heads) +
                     ",dim=" + std::to_string(dim) + ",qk_norm=" + (qk_norm ? "1" : "0");
  text += page > 0 ? ",kv_out=pages,page=" + std::to_string(page) + ",kv=" + kv + ",kv_scale=" + kv_scale
                   : std::string(",kv_out=dense");
  try {
    return rope::Spec::parse(text).to_string();
  } catch (const InputError& e) {
    throw py::value_error(std::string(kOp) + ": no kernel for these arguments (" + text + "): " + e.what());
  }
}

using Shape = PreparedShape<rope::Spec, rope::Config, rope::Args>;

int kv_code(const std::string& text) { return text == "f16" ? 0 : text == "e4m3" ? 1 : text == "e5m2" ? 2 : 3; }
int kv_scale_code(const std::string& text) {
  return text == "none" ? 0 : text == "tensor" ? 1 : text == "head" ? 2 : 3;
}

Shape& prepared(int64_t heads, int64_t kv_heads, int64_t dim, bool qk_norm, int64_t page, const std::string& kv,
                const std::string& kv_scale) {
  using Key = std::array<int64_t, 7>;
  static auto* table = new std::map<Key, Shape>();  // never destroyed, like the Session
  const Key key{heads, kv_heads, dim, qk_norm ? 1 : 0, page, kv_code(kv), kv_scale_code(kv_scale)};
  return prepared_shape(*table, key, [&] { return spec_for(heads, kv_heads, dim, qk_norm, page, kv, kv_scale); });
}

// q: fp16 [tokens, heads, dim] (written); k, v: fp16 [tokens, kv_heads, dim] (dense) or None
// with k_cache/v_cache [pages, kv_heads, page, dim] and slot_mapping int32 [tokens] (pages).
void rope_op(py::handle q, py::handle k, py::handle v, py::handle qkv, py::handle positions, py::handle inv_freq,
             double attention_factor, py::handle q_norm, py::handle k_norm, double eps, py::handle k_cache,
             py::handle v_cache, py::handle slot_mapping, py::handle k_scale, py::handle v_scale, const std::string& kv,
             uintptr_t stream, const std::string& kernel_spec, const std::string& config) {
  const std::string label = kOp;
  ArrayView qv = cuda_array(q, DType::kFloat16, 3, {kOp, "q"}, -1);
  const int64_t tokens = qv.shape[0], heads = qv.shape[1], dim = qv.shape[2];
  const bool paged = !k_cache.is_none();
  Caches c;
  ArrayView kd, vd, sv, ks, vs;
  std::string kv_scale = "none";
  int64_t kv_heads = 0, page = 0;
  if (paged) {
    if (!k.is_none() || !v.is_none()) throw py::value_error(label + ": pass k and v, or k_cache and v_cache, not both");
    c = caches_of(k_cache, v_cache, kv, label, qv.device);
    kv_scale = scales_of(k_scale, v_scale, c, ks, vs, label);
    kv_heads = c.k.shape[1], page = c.k.shape[2];
    if (c.k.shape[3] != dim) {
      throw py::value_error(label + ": k_cache's last dimension (head dim) must be q's " + std::to_string(dim) +
                            ", got " + c.k.shape_text());
    }
    if (slot_mapping.is_none()) throw py::value_error(label + ": slot_mapping is required with k_cache and v_cache");
    sv = cuda_array(slot_mapping, DType::kInt32, 1, {kOp, "slot_mapping"}, qv.device);
    require_shape(sv, {tokens}, {kOp, "slot_mapping"});
  } else {
    if (k.is_none() || v.is_none())
      throw py::value_error(label + ": pass k and v (dense outputs) or k_cache and v_cache");
    if (!slot_mapping.is_none() || !k_scale.is_none() || !v_scale.is_none() || (!kv.empty() && kv != "f16")) {
      throw py::value_error(label + ": slot_mapping, k_scale, v_scale and kv are for k_cache/v_cache only");
    }
    kd = cuda_array(k, DType::kFloat16, 3, {kOp, "k"}, qv.device);
    kv_heads = kd.shape[1];
    require_shape(kd, {tokens, kv_heads, dim}, {kOp, "k"});
    vd = cuda_array(v, DType::kFloat16, 3, {kOp, "v"}, qv.device);
    require_shape(vd, kd.shape, {kOp, "v"});
  }
  ArrayView xv = cuda_array(qkv, DType::kFloat16, 0, {kOp, "qkv"}, qv.device);
  const int64_t width = (heads + 2 * kv_heads) * dim;
  if (xv.shape.empty() || xv.shape[0] != tokens || xv.numel() != tokens * width) {
    throw py::value_error(label + ": qkv must hold " + std::to_string(tokens) + " rows of (" + std::to_string(heads) +
                          " + 2·" + std::to_string(kv_heads) + ") heads of " + std::to_string(dim) + " values, got " +
                          xv.shape_text());
  }
  ArrayView pv = cuda_array(positions, DType::kInt32, 1, {kOp, "positions"}, qv.device);
  require_shape(pv, {tokens}, {kOp, "positions"});
  ArrayView fv = cuda_array(inv_freq, DType::kFloat32, 1, {kOp, "inv_freq"}, qv.device);
  require_shape(fv, {dim / 2}, {kOp, "inv_freq"});
  if (q_norm.is_none() != k_norm.is_none()) throw py::value_error(label + ": pass q_norm and k_norm together");
  const bool qk_norm = !q_norm.is_none();
  ArrayView qn, kn;
  if (qk_norm) {
    qn = cuda_array(q_norm, DType::kFloat16, 1, {kOp, "q_norm"}, qv.device);
    require_shape(qn, {dim}, {kOp, "q_norm"});
    kn = cuda_array(k_norm, DType::kFloat16, 1, {kOp, "k_norm"}, qv.device);
    require_shape(kn, {dim}, {kOp, "k_norm"});
  }
  if (!std::isfinite(attention_factor)) throw py::value_error(label + ": attention_factor must be finite");
  if (!(eps >= 0) || !std::isfinite(eps)) throw py::value_error(label + ": eps must be a finite number ≥ 0");
  if (tokens > INT_MAX) throw py::value_error(label + ": more than 2^31 - 1 tokens");
  Shape& p = prepared(heads, kv_heads, dim, qk_norm, page, paged ? c.kv : "f16", kv_scale);
  p.check_kernel_spec(kernel_spec, label);
  const bool fp8 = paged && c.kv != "f16";
  const int device = resolve_devices({{&qv, {kOp, "q"}},
                                      {&xv, {kOp, "qkv"}},
                                      {&pv, {kOp, "positions"}},
                                      {&fv, {kOp, "inv_freq"}},
                                      {qk_norm ? &qn : nullptr, {kOp, "q_norm"}},
                                      {qk_norm ? &kn : nullptr, {kOp, "k_norm"}},
                                      {paged ? nullptr : &kd, {kOp, "k"}},
                                      {paged ? nullptr : &vd, {kOp, "v"}},
                                      {paged ? &c.k : nullptr, {kOp, "k_cache"}},
                                      {paged ? &c.v : nullptr, {kOp, "v_cache"}},
                                      {paged ? &sv : nullptr, {kOp, "slot_mapping"}},
                                      {fp8 ? &ks : nullptr, {kOp, "k_scale"}},
                                      {fp8 ? &vs : nullptr, {kOp, "v_scale"}}});
  Runtime::get().use_gpu(device);
  if (tokens == 0) return;
  const Shape::Chosen chosen = p.choose(tokens, config);
  const int align = rope::pointer_alignment(chosen.config);
  require_aligned(xv, align, {kOp, "qkv"});
  require_aligned(qv, align, {kOp, "q"});
  if (qk_norm) require_aligned(qn, align, {kOp, "q_norm"}), require_aligned(kn, align, {kOp, "k_norm"});
  if (paged) {
    require_aligned(c.k, kCacheAlignment, {kOp, "k_cache"}), require_aligned(c.v, kCacheAlignment, {kOp, "v_cache"});
  } else {
    require_aligned(kd, align, {kOp, "k"}), require_aligned(vd, align, {kOp, "v"});
  }
  rope::Args a;
  a.qkv = xv.data, a.positions = pv.data, a.inv_freq = fv.data, a.attention_factor = float(attention_factor);
  a.q_norm = qk_norm ? qn.data : 0, a.k_norm = qk_norm ? kn.data : 0, a.eps = float(eps), a.q = qv.data;
  a.k = paged ? c.k.data : kd.data, a.v = paged ? c.v.data : vd.data, a.slot_mapping = paged ? sv.data : 0;
  a.k_scale = fp8 ? ks.data : 0, a.v_scale = fp8 ? vs.data : 0, a.tokens = tokens;
  launch(*chosen.kernel, rope::make_call(chosen.spec, chosen.config, a), as_stream(stream));
}

// transformers' inverse frequencies and attention factor (cpu::rope_table); ValueError for bad
// parameters.
std::pair<std::vector<float>, float> rope_table(int64_t dim, const std::string& scaling, double theta, double factor,
                                                double low_freq_factor, double high_freq_factor,
                                                int64_t original_max_position, double beta_fast, double beta_slow,
                                                double attention_factor, double mscale, double mscale_all_dim,
                                                bool truncate) {
  using Scaling = cpu::RopeParams::Scaling;
  cpu::RopeParams p;
  if (scaling == "default") {
    p.scaling = Scaling::kNone;
  } else if (scaling == "linear") {
    p.scaling = Scaling::kLinear;
  } else if (scaling == "llama3") {
    p.scaling = Scaling::kLlama3;
  } else if (scaling == "yarn") {
    p.scaling = Scaling::kYarn;
  } else {
    throw py::value_error("onecat.rope_table: scaling must be 'default', 'linear', 'llama3' or 'yarn', got '" +
                          scaling + "'");
  }
  if (dim < 2 || dim > rope::kMaxDim)
    throw py::value_error("onecat.rope_table: dim must be in [2, 512], got " + std::to_string(dim));
  p.theta = theta, p.factor = factor, p.low_freq_factor = low_freq_factor, p.high_freq_factor = high_freq_factor;
  p.original_max_position = original_max_position, p.beta_fast = beta_fast, p.beta_slow = beta_slow;
  p.attention_factor = attention_factor, p.mscale = mscale, p.mscale_all_dim = mscale_all_dim, p.truncate = truncate;
  cpu::RopeTable t;
  try {
    t = cpu::rope_table(p, int(dim));
  } catch (const InputError& e) {
    throw py::value_error(std::string("onecat.rope_table: ") + e.what());
  }
  return {std::move(t.inv_freq), t.attention_factor};
}

}  // namespace

void bind_rope(py::module_& m) {
  m.def("rope_spec", &spec_for, py::arg("heads"), py::arg("kv_heads"), py::arg("dim"), py::arg("qk_norm"),
        py::arg("page"), py::arg("kv"), py::arg("kv_scale"));
  m.def("rope", &rope_op, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("qkv"), py::arg("positions"),
        py::arg("inv_freq"), py::arg("attention_factor"), py::arg("q_norm"), py::arg("k_norm"), py::arg("eps"),
        py::arg("k_cache"), py::arg("v_cache"), py::arg("slot_mapping"), py::arg("k_scale"), py::arg("v_scale"),
        py::arg("kv"), py::arg("stream"), py::arg("kernel_spec") = "", py::arg("config") = "");
  m.def("rope_table", &rope_table, py::arg("dim"), py::arg("scaling"), py::arg("theta"), py::arg("factor"),
        py::arg("low_freq_factor"), py::arg("high_freq_factor"), py::arg("original_max_position"), py::arg("beta_fast"),
        py::arg("beta_slow"), py::arg("attention_factor"), py::arg("mscale"), py::arg("mscale_all_dim"),
        py::arg("truncate"));
}

}  // namespace onecat::python
