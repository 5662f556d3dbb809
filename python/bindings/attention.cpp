// attention bindings: paged prefill / decode / verify over a K/V page pool, and kv_write
// (codegen/attention, docs/attention.md). The spec comes from the arrays' shapes and dtypes
// plus the keyword arguments; the kernel is the dispatched one for the bucket (tokens for
// prefill and kv_write, sequences for decode and verify). Split-KV workspace is never
// allocated here: the caller passes it (onecat.attention.workspace), so a call only launches
// and CUDA graph capture works.
#include <pybind11/stl.h>

#include <array>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "codegen/attention/emit.h"
#include "codegen/attention/op.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/kv_cache.h"
#include "python/bindings/runtime.h"
#include "runtime/engine/prepared_op.h"

namespace onecat::python {
namespace {

// Every attention kernel reads q, out and the caches in 16-byte chunks.
constexpr int kAlignment = 16;

// The name messages give an op (made once: a call builds no text unless it raises).
const std::string& op_label(const std::string& op) {
  static const std::string kPrefill = "onecat.attention.prefill", kDecode = "onecat.attention.decode",
                           kVerify = "onecat.attention.verify", kKvWrite = "onecat.kv_write",
                           kOther = "onecat.attention";
  return op == "decode"     ? kDecode
         : op == "prefill"  ? kPrefill
         : op == "verify"   ? kVerify
         : op == "kv_write" ? kKvWrite
                            : kOther;
}

// The canonical spec; ValueError (naming the op) when the family has no kernel for it.
std::string spec_for(const std::string& op, int64_t heads, int64_t kv_heads, int64_t dim, int64_t page,
                     const std::string& kv, const std::string& kv_scale, bool causal, int64_t window, int64_t q) {
  const std::string& label = op_label(op);
  if (op != "prefill" && op != "decode" && op != "verify" && op != "kv_write") {
    throw py::value_error(label + ": op must be prefill, decode, verify or kv_write, got '" + op + "'");
  }
  std::string text = "attention:op=" + op;
  if (op != "kv_write") text += ",heads=" + std::to_string(heads);
  text += ",kv_heads=" + std::to_string(kv_heads) + ",dim=" + std::to_string(dim) + ",page=" + std::to_string(page) +
          ",kv=" + kv + ",kv_scale=" + kv_scale;
  if (op == "prefill") text += std::string(",causal=") + (causal ? "1" : "0");
  if (op == "verify") text += ",q=" + std::to_string(q);
  if (op != "kv_write") text += ",window=" + std::to_string(window);
  try {
    return attention::Spec::parse(text).to_string();
  } catch (const InputError& e) {
    throw py::value_error(label + ": no kernel for these arguments (" + text + "): " + e.what());
  }
}

ArrayView cuda_array(py::handle obj, const Arg& arg, int device) {
  ArrayView v = view_of(obj, arg);
  require_cuda(v, arg);
  require_contiguous(v, arg);
  require_same_device(v, device, arg);
  return v;
}

ArrayView typed(py::handle obj, DType t, size_t ndim, const Arg& arg, int device) {
  ArrayView v = view_of(obj, arg);
  require_cuda(v, arg);
  require_dtype(v, t, arg);
  require_ndim(v, ndim, arg);
  require_contiguous(v, arg);
  require_same_device(v, device, arg);
  return v;
}

int to_int(int64_t v, const std::string& label, const char* what) {
  if (v < 0 || v > INT_MAX) throw py::value_error(label + ": " + what + " " + std::to_string(v) + " is out of range");
  return int(v);
}

}  // namespace

// Also rope's (kv_out=pages): python/bindings/kv_cache.h.
Caches caches_of(py::handle k_cache, py::handle v_cache, const std::string& kv, const std::string& label, int device) {
  Caches c;
  const Arg ka{label.c_str(), "k_cache"}, va{label.c_str(), "v_cache"};
  c.k = cuda_array(k_cache, ka, device);
  require_dtype_size(c.k, {DType::kFloat16, DType::kUInt8, DType::kInt8, DType::kFloat8}, "float16, or uint8/float8 fp8 codes", ka);
  require_ndim(c.k, 4, ka);
  c.v = cuda_array(v_cache, va, c.k.device);
  require_dtype(c.v, c.k.dtype, va);
  require_shape(c.v, c.k.shape, va);
  if (c.k.dtype == DType::kFloat16) {
    if (!kv.empty() && kv != "f16") {
      throw py::value_error(label + ": kv='" + kv + "' needs uint8 (fp8 code) caches, got float16");
    }
    c.kv = "f16";
  } else {
    std::string want = kv;
    if (want.empty() && c.k.dtype_name == "float8_e4m3fn") want = "e4m3";
    if (want.empty() && c.k.dtype_name == "float8_e5m2") want = "e5m2";
    if (want != "e4m3" && want != "e5m2") {
      throw py::value_error(label + ": k_cache holds 1-byte codes: pass kv=\"e4m3\" or kv=\"e5m2\"" +
                            (kv.empty() ? std::string() : ", got kv='" + kv + "'"));
    }
    c.kv = want;
  }
  return c;
}

// k_scale / v_scale: none for fp16 caches; fp32 [1] (kv_scale=tensor) or [kv_heads] (head) for fp8.
std::string scales_of(py::handle k_scale, py::handle v_scale, const Caches& c, ArrayView& ks, ArrayView& vs,
                      const std::string& label) {
  const int64_t kv_heads = c.k.shape[1];
  if (c.kv == "f16") {
    if (!k_scale.is_none() || !v_scale.is_none()) {
      throw py::value_error(label + ": k_scale/v_scale are for fp8 caches only (these caches are float16)");
    }
    return "none";
  }
  if (k_scale.is_none() || v_scale.is_none()) {
    throw py::value_error(label + ": fp8 caches need k_scale and v_scale (float32 [1] or [kv_heads])");
  }
  const Arg ka{label.c_str(), "k_scale"}, va{label.c_str(), "v_scale"};
  ks = typed(k_scale, DType::kFloat32, 1, ka, c.k.device);
  if (ks.shape[0] != 1 && ks.shape[0] != kv_heads) {
    throw py::value_error(label + ": k_scale must have shape (1,) or (" + std::to_string(kv_heads) + ",), got " + ks.shape_text());
  }
  vs = typed(v_scale, DType::kFloat32, 1, va, c.k.device);
  require_shape(vs, ks.shape, va);
  return ks.shape[0] == 1 ? "tensor" : "head";
}

namespace {

struct Chosen {
  const LoadedKernel* kernel;
  attention::Spec spec;
  attention::Config config;
};

using AttentionOp = PreparedOp<attention::Spec, attention::Config, attention::Args>;

// One shape of arguments: its canonical spec, made and checked on the shape's first call (so a
// shape without a kernel is reported before any driver call, as every bad argument is), and
// its prepared op, made on the first call that reaches the GPU. Later calls find it by the
// shape's numbers and build no text (ARCHITECTURE.md rule 4).
struct Prepared {
  std::string spec;
  std::unique_ptr<AttentionOp> op;
};

int code_of(const std::string& text, std::initializer_list<const char*> names) {
  int i = 0;
  for (const char* n : names) {
    if (text == n) return i;
    ++i;
  }
  return i;
}

Prepared& prepared(const std::string& op, int64_t heads, int64_t kv_heads, int64_t dim, int64_t page,
                   const std::string& kv, const std::string& kv_scale, bool causal, int64_t window, int64_t q) {
  using Key = std::array<int64_t, 10>;
  static auto* table = new std::map<Key, Prepared>();  // never destroyed, like the Session
  const Key key{code_of(op, {"prefill", "decode", "verify", "kv_write"}), heads, kv_heads, dim, page,
                code_of(kv, {"f16", "e4m3", "e5m2"}), code_of(kv_scale, {"none", "tensor", "head"}), causal ? 1 : 0,
                window, q};
  if (auto it = table->find(key); it != table->end()) return it->second;
  Prepared p{spec_for(op, heads, kv_heads, dim, page, kv, kv_scale, causal, window, q), nullptr};  // throws for no kernel
  return table->emplace(key, std::move(p)).first->second;
}

// The kernel for m: the prepared op's dispatched one, or a compiled kernel's own config.
Chosen choose(Prepared& p, int64_t m, const std::string& config) {
  if (config.empty()) {
    if (!p.op) p.op = std::make_unique<AttentionOp>(Runtime::get(), p.spec);
    return {&p.op->kernel(m), p.op->spec(), p.op->config(m)};
  }
  const attention::Spec s = attention::Spec::parse(p.spec);  // a compiled kernel: not the dispatched hot path
  return {&Runtime::get().kernel_with_config(p.spec, config), s, attention::Config::parse(s, config)};
}

void check_kernel_spec(const std::string& kernel_spec, const Prepared& p, const std::string& label) {
  if (!kernel_spec.empty() && kernel_spec != p.spec) {
    throw py::value_error(label + ": this kernel is " + kernel_spec + " but the arguments need " + p.spec);
  }
}

// prefill / decode / verify.
void attention_op(const std::string& op, py::handle out, py::handle q, py::handle k_cache, py::handle v_cache,
                  py::handle block_table, py::handle seq_lens, py::handle cu_seqlens, py::handle k_scale,
                  py::handle v_scale, py::handle partial, py::handle counters, const std::string& kv, bool causal,
                  int64_t window, int64_t max_q, double sm_scale, uintptr_t stream, const std::string& kernel_spec,
                  const std::string& config) {
  const std::string& label = op_label(op);
  const char* L = label.c_str();
  if (op != "prefill" && op != "decode" && op != "verify") throw py::value_error(label + ": unknown attention op");
  ArrayView qv = typed(q, DType::kFloat16, 3, {L, "q"}, -1);
  Caches c = caches_of(k_cache, v_cache, kv, label, qv.device);
  ArrayView ks, vs;
  const std::string kv_scale = scales_of(k_scale, v_scale, c, ks, vs, label);
  const int64_t tokens = qv.shape[0], heads = qv.shape[1], dim = qv.shape[2];
  const int64_t kv_heads = c.k.shape[1], page = c.k.shape[2];
  if (c.k.shape[3] != dim) {
    throw py::value_error(label + ": k_cache's last dimension (head dim) must be q's " + std::to_string(dim) +
                          ", got " + c.k.shape_text());
  }
  ArrayView tv = typed(block_table, DType::kInt32, 2, {L, "block_table"}, qv.device);
  const int64_t batch = tv.shape[0];
  ArrayView lv = typed(seq_lens, DType::kInt32, 1, {L, "seq_lens"}, qv.device);
  require_shape(lv, {batch}, {L, "seq_lens"});
  const bool prefill = op == "prefill";
  ArrayView cv;
  if (prefill) {
    if (cu_seqlens.is_none()) throw py::value_error(label + ": cu_seqlens is required");
    cv = typed(cu_seqlens, DType::kInt32, 1, {L, "cu_seqlens"}, qv.device);
    require_shape(cv, {batch + 1}, {L, "cu_seqlens"});
  }
  int64_t q_per_seq = 1;
  if (op == "decode" && tokens != batch) {
    throw py::value_error(label + ": q must have one token per sequence: shape (" + std::to_string(batch) + ", " +
                          std::to_string(heads) + ", " + std::to_string(dim) + "), got " + qv.shape_text());
  }
  if (op == "verify") {
    if (batch == 0 || tokens % batch != 0) {
      throw py::value_error(label + ": q's " + std::to_string(tokens) + " tokens are not a whole number per sequence (" +
                            std::to_string(batch) + " sequences)");
    }
    q_per_seq = tokens / batch;
  }
  ArrayView ov = typed(out, DType::kFloat16, 3, {L, "out"}, qv.device);
  require_shape(ov, qv.shape, {L, "out"});
  Prepared& prep = prepared(op, heads, kv_heads, dim, page, c.kv, kv_scale, causal, window, q_per_seq);
  check_kernel_spec(kernel_spec, prep, label);
  if (prefill && tokens > 0 && max_q < 1) {
    throw py::value_error(label + ": max_q (the longest query count of the batch) must be ≥ 1, got " + std::to_string(max_q));
  }
  if (prefill && max_q > tokens) {
    throw py::value_error(label + ": max_q " + std::to_string(max_q) + " exceeds q's " + std::to_string(tokens) + " tokens");
  }
  if (!std::isfinite(sm_scale)) throw py::value_error(label + ": sm_scale must be finite");
  const bool has_partial = !partial.is_none(), has_counters = !counters.is_none();
  if (has_partial != has_counters) throw py::value_error(label + ": pass the workspace's partial and counters together");
  ArrayView pv, nv;
  if (has_partial) {
    pv = typed(partial, DType::kFloat32, 1, {L, "workspace.partial"}, qv.device);
    nv = typed(counters, DType::kInt32, 1, {L, "workspace.counters"}, qv.device);
  }
  const int max_pages = to_int(tv.shape[1], label, "block_table's row length");
  to_int(tokens, label, "token count");

  const bool fp8 = c.kv != "f16";
  const int device = resolve_devices({{&qv, {L, "q"}}, {&c.k, {L, "k_cache"}}, {&c.v, {L, "v_cache"}},
                                      {fp8 ? &ks : nullptr, {L, "k_scale"}}, {fp8 ? &vs : nullptr, {L, "v_scale"}},
                                      {&tv, {L, "block_table"}}, {&lv, {L, "seq_lens"}},
                                      {prefill ? &cv : nullptr, {L, "cu_seqlens"}}, {&ov, {L, "out"}},
                                      {has_partial ? &pv : nullptr, {L, "workspace.partial"}},
                                      {has_partial ? &nv : nullptr, {L, "workspace.counters"}}});
  Runtime::get().use_gpu(device);
  if (batch == 0 || tokens == 0) return;
  const Chosen k = choose(prep, prefill ? tokens : batch, config);
  const int64_t floats = attention::workspace_floats(k.spec, k.config, batch);
  const int64_t ncounters = attention::workspace_counters(k.spec, k.config, batch);
  if (floats > 0 || ncounters > 0) {
    if (!has_partial) {
      throw py::value_error(label + ": this batch's kernel (" + k.config.to_string() + ") splits the keys and needs a workspace of " +
                            std::to_string(floats) + " floats and " + std::to_string(ncounters) +
                            " zeroed counters: pass workspace=onecat.attention.workspace(spec, batch, like=q)");
    }
    if (pv.numel() < floats || nv.numel() < ncounters) {
      throw py::value_error(label + ": the workspace is too small for this batch (needs " + std::to_string(floats) +
                            " partial floats and " + std::to_string(ncounters) + " counters, has " +
                            std::to_string(pv.numel()) + " and " + std::to_string(nv.numel()) + ")");
    }
  }
  for (auto [v, name] : std::initializer_list<std::pair<ArrayView*, const char*>>{{&qv, "q"}, {&ov, "out"}, {&c.k, "k_cache"}, {&c.v, "v_cache"}}) {
    require_aligned(*v, kAlignment, {L, name});
  }
  attention::Args a;
  a.out = ov.data, a.q = qv.data, a.k_cache = c.k.data, a.v_cache = c.v.data;
  a.k_scale = fp8 ? ks.data : 0, a.v_scale = fp8 ? vs.data : 0, a.block_table = tv.data, a.max_pages = max_pages;
  a.seq_lens = lv.data, a.cu_q = prefill ? cv.data : 0, a.sm_scale = float(sm_scale);
  a.partial = has_partial ? pv.data : 0, a.counters = has_partial ? nv.data : 0, a.batch = batch, a.max_q = max_q;
  launch(*k.kernel, attention::make_call(k.spec, k.config, a), as_stream(stream));
}

void kv_write_op(py::handle k_cache, py::handle v_cache, py::handle k, py::handle v, py::handle slot_mapping,
                 py::handle k_scale, py::handle v_scale, const std::string& kv, uintptr_t stream,
                 const std::string& kernel_spec, const std::string& config) {
  const std::string& label = op_label("kv_write");
  const char* L = label.c_str();
  Caches c = caches_of(k_cache, v_cache, kv, label, -1);
  ArrayView ks, vs;
  const std::string kv_scale = scales_of(k_scale, v_scale, c, ks, vs, label);
  const int64_t kv_heads = c.k.shape[1], page = c.k.shape[2], dim = c.k.shape[3];
  ArrayView kn = typed(k, DType::kFloat16, 3, {L, "k"}, c.k.device);
  const int64_t tokens = kn.shape[0];
  require_shape(kn, {tokens, kv_heads, dim}, {L, "k"});
  ArrayView vn = typed(v, DType::kFloat16, 3, {L, "v"}, c.k.device);
  require_shape(vn, kn.shape, {L, "v"});
  ArrayView sv = typed(slot_mapping, DType::kInt32, 1, {L, "slot_mapping"}, c.k.device);
  require_shape(sv, {tokens}, {L, "slot_mapping"});
  Prepared& prep = prepared("kv_write", 0, kv_heads, dim, page, c.kv, kv_scale, true, 0, 1);
  check_kernel_spec(kernel_spec, prep, label);
  const int tokens_arg = to_int(tokens, label, "token count");
  const bool fp8 = c.kv != "f16";
  const int device = resolve_devices({{&c.k, {L, "k_cache"}}, {&c.v, {L, "v_cache"}}, {&kn, {L, "k"}}, {&vn, {L, "v"}},
                                      {&sv, {L, "slot_mapping"}}, {fp8 ? &ks : nullptr, {L, "k_scale"}},
                                      {fp8 ? &vs : nullptr, {L, "v_scale"}}});
  Runtime::get().use_gpu(device);
  if (tokens == 0) return;
  const Chosen ch = choose(prep, tokens, config);
  for (auto [a, name] : std::initializer_list<std::pair<ArrayView*, const char*>>{{&kn, "k"}, {&vn, "v"}, {&c.k, "k_cache"}, {&c.v, "v_cache"}}) {
    require_aligned(*a, kAlignment, {L, name});
  }
  const attention::KvWriteArgs a{c.k.data, c.v.data, kn.data, vn.data, sv.data, fp8 ? ks.data : 0, fp8 ? vs.data : 0,
                                  tokens_arg};
  launch(*ch.kernel, attention::make_call(ch.spec, ch.config, a), as_stream(stream));
}

// (partial floats, counters) the dispatched kernel of `spec` needs for `batch` sequences.
std::tuple<int64_t, int64_t> workspace_size(const std::string& spec, int64_t batch, const std::string& config) {
  attention::Spec s;
  try {
    s = attention::Spec::parse(spec);
  } catch (const InputError& e) {
    throw py::value_error(std::string("onecat.attention.workspace_size: ") + e.what());
  }
  if (s.op == attention::Op::kPrefill || s.op == attention::Op::kKvWrite || batch <= 0) return {0, 0};
  Runtime& rt = Runtime::get();
  rt.use_gpu(rt.ordinal());
  const std::string canonical = s.to_string();
  const std::string chosen = config.empty() ? rt.kernel_for(canonical, batch).config : config;
  const attention::Config c = attention::Config::parse(s, chosen);
  return {attention::workspace_floats(s, c, batch), attention::workspace_counters(s, c, batch)};
}

}  // namespace

void bind_attention(py::module_& m) {
  m.def("attention_spec", &spec_for, py::arg("op"), py::arg("heads"), py::arg("kv_heads"), py::arg("dim"),
        py::arg("page"), py::arg("kv"), py::arg("kv_scale"), py::arg("causal"), py::arg("window"), py::arg("q"));
  m.def("attention", &attention_op, py::arg("op"), py::arg("out"), py::arg("q"), py::arg("k_cache"),
        py::arg("v_cache"), py::arg("block_table"), py::arg("seq_lens"), py::arg("cu_seqlens"), py::arg("k_scale"),
        py::arg("v_scale"), py::arg("partial"), py::arg("counters"), py::arg("kv"), py::arg("causal"),
        py::arg("window"), py::arg("max_q"), py::arg("sm_scale"), py::arg("stream"), py::arg("kernel_spec") = "",
        py::arg("config") = "");
  m.def("kv_write", &kv_write_op, py::arg("k_cache"), py::arg("v_cache"), py::arg("k"), py::arg("v"),
        py::arg("slot_mapping"), py::arg("k_scale"), py::arg("v_scale"), py::arg("kv"), py::arg("stream"),
        py::arg("kernel_spec") = "", py::arg("config") = "");
  m.def("attention_workspace_size", &workspace_size, py::arg("spec"), py::arg("batch"), py::arg("config") = "");
}

}  // namespace onecat::python
