// sampling bindings: rows of fp32 logits → sampled tokens with their logprobs and the top-n
// logprobs (op=sample), or each row's argmax (op=argmax) (codegen/sampling, docs/sampling.md).
// SamplingRows checks and packs the per-row settings and histories once per call on the host
// (cpu::invalid_reason, the sentences the server and the CLI use); the Python layer uploads
// them and calls sample() with device arrays only. sample_host and argmax_host are the CPU
// twins (runtime/cpu/sampling), on host arrays.
#include "runtime/cpu/sampling.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <climits>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "base/error.h"
#include "codegen/sampling/emit.h"
#include "codegen/sampling/op.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/prepared.h"
#include "python/bindings/runtime.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/dispatch.h"

namespace onecat::python {
namespace {

constexpr const char* kSample = "onecat.sample";
constexpr const char* kArgmax = "onecat.argmax";
// RowParams hold 64-bit fields.
constexpr int kParamsAlignment = alignof(sampling::RowParams);

std::string spec_for(const std::string& op, int64_t vocab, int64_t logprobs) {
  const bool argmax = op == "argmax";
  const std::string label = argmax ? kArgmax : kSample;
  if (!argmax && op != "sample") throw py::value_error(label + ": op must be 'sample' or 'argmax', got '" + op + "'");
  std::string text = "sampling:op=" + op + ",vocab=" + std::to_string(vocab);
  if (!argmax) text += ",logprobs=" + std::to_string(logprobs);
  try {
    return sampling::Spec::parse(text).to_string();
  } catch (const InputError& e) {
    throw py::value_error(label + ": no kernel for these arguments (" + text + "): " + e.what());
  }
}

// Every row's settings and history, checked: what the kernel's RowParams and CSR history hold,
// and what the CPU reference takes.
struct SamplingRows {
  int64_t vocab = 0;
  std::vector<cpu::SamplingParams> params;
  std::vector<uint64_t> steps;
  std::vector<int32_t> prompt_lengths;
  std::vector<int32_t> offsets{0};  // [rows + 1]: row r's history is ids[offsets[r], offsets[r+1])
  std::vector<int32_t> ids;         // each row's prompt ids, then its output ids
  int max_logprobs = 0;

  int64_t rows() const { return int64_t(params.size()); }
  std::span<const int> prompt(int64_t r) const {
    return {ids.data() + offsets[size_t(r)], size_t(prompt_lengths[size_t(r)])};
  }
  std::span<const int> output(int64_t r) const {
    const int32_t begin = offsets[size_t(r)] + prompt_lengths[size_t(r)];
    return {ids.data() + begin, size_t(offsets[size_t(r) + 1] - begin)};
  }
  py::bytes row_params() const {
    std::vector<sampling::RowParams> out;
    out.reserve(params.size());
    for (size_t r = 0; r < params.size(); ++r) out.push_back(cpu::row_params(params[r], steps[r], prompt_lengths[r]));
    return py::bytes(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(sampling::RowParams));
  }
  static py::bytes as_bytes(const std::vector<int32_t>& v) {
    return py::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int32_t));
  }
};

// One row's history list: ids in [0, vocab).
void append_history(SamplingRows& s, const std::vector<std::vector<int64_t>>* lists, int64_t r, const char* name) {
  if (!lists) return;
  for (int64_t id : (*lists)[size_t(r)]) {
    if (id < 0 || id >= s.vocab) {
      throw py::value_error(std::string(kSample) + ": " + name + "[" + std::to_string(r) + "] holds id " +
                            std::to_string(id) + ", outside the vocabulary [0, " + std::to_string(s.vocab) + ")");
    }
    if (s.ids.size() >= size_t(INT_MAX))
      throw py::value_error(std::string(kSample) + ": more than 2^31 - 1 history ids");
    s.ids.push_back(int32_t(id));
  }
}

SamplingRows make_rows(int64_t vocab, const std::vector<double>& temperature, const std::vector<int64_t>& top_k,
                       const std::vector<double>& top_p, const std::vector<double>& min_p,
                       const std::vector<double>& repetition_penalty, const std::vector<double>& presence_penalty,
                       const std::vector<double>& frequency_penalty, const std::vector<uint64_t>& seed,
                       const std::vector<uint64_t>& step, const std::vector<int64_t>& logprobs,
                       const std::optional<std::vector<std::vector<int64_t>>>& prompt_tokens,
                       const std::optional<std::vector<std::vector<int64_t>>>& output_tokens) {
  const size_t rows = temperature.size();
  for (size_t n : {top_k.size(), top_p.size(), min_p.size(), repetition_penalty.size(), presence_penalty.size(),
                   frequency_penalty.size(), seed.size(), step.size(), logprobs.size()}) {
    if (n != rows) throw py::value_error(std::string(kSample) + ": every per-row setting needs one value per row");
  }
  for (const auto* h : {prompt_tokens ? &*prompt_tokens : nullptr, output_tokens ? &*output_tokens : nullptr}) {
    if (h && h->size() != rows) {
      throw py::value_error(std::string(kSample) + ": prompt_tokens and output_tokens need one list per row (" +
                            std::to_string(rows) + "), got " + std::to_string(h->size()));
    }
  }
  SamplingRows s;
  s.vocab = vocab;
  s.params.reserve(rows);
  for (size_t r = 0; r < rows; ++r) {
    cpu::SamplingParams p;
    p.temperature = float(temperature[r]), p.top_p = float(top_p[r]), p.min_p = float(min_p[r]);
    p.top_k = int(std::clamp<int64_t>(top_k[r], INT_MIN, INT_MAX));
    p.repetition_penalty = float(repetition_penalty[r]), p.presence_penalty = float(presence_penalty[r]);
    p.frequency_penalty = float(frequency_penalty[r]), p.seed = seed[r];
    p.logprobs = int(std::clamp<int64_t>(logprobs[r], INT_MIN, INT_MAX));
    if (auto why = cpu::invalid_reason(p)) {
      throw py::value_error(std::string(kSample) + ": " + *why + (rows > 1 ? " (row " + std::to_string(r) + ")" : ""));
    }
    s.params.push_back(p);
    s.steps.push_back(step[r]);
    s.max_logprobs = std::max(s.max_logprobs, p.logprobs);
    append_history(s, prompt_tokens ? &*prompt_tokens : nullptr, int64_t(r), "prompt_tokens");
    s.prompt_lengths.push_back(int32_t(s.ids.size()) - s.offsets.back());
    append_history(s, output_tokens ? &*output_tokens : nullptr, int64_t(r), "output_tokens");
    s.offsets.push_back(int32_t(s.ids.size()));
  }
  return s;
}

using SampleShape = PreparedShape<sampling::Spec, sampling::Config, sampling::Args>;

// argmax's split configs merge through a workspace, kept with the shape: sized for the largest
// bucket so far and zeroed once when allocated (the kernel leaves it zero, codegen/sampling/op.h).
struct ArgmaxShape : PreparedShape<sampling::Spec, sampling::Config, sampling::ArgmaxArgs> {
  ZeroedWorkspace workspace;
};

SampleShape& sample_shape(int64_t vocab, int64_t logprobs) {
  using Key = std::array<int64_t, 2>;
  static auto* table = new std::map<Key, SampleShape>();  // never destroyed, like the Session
  return prepared_shape(*table, Key{vocab, logprobs}, [&] { return spec_for("sample", vocab, logprobs); });
}

ArgmaxShape& argmax_shape(int64_t vocab) {
  static auto* table = new std::map<int64_t, ArgmaxShape>();
  return prepared_shape(*table, vocab, [&] { return spec_for("argmax", vocab, 0); });
}

int64_t checked_rows(int64_t rows, const char* label) {
  if (rows > INT_MAX)
    throw py::value_error(std::string(label) + ": logits has " + std::to_string(rows) + " rows, more than 2^31 - 1");
  return rows;
}

// op=sample on device arrays: params uint8 [rows, 56] (SamplingRows.row_params), the history
// CSR int32 (all three None: no penalties), top_ids/top_logprobs [rows, logprobs] (None when
// logprobs is 0).
void sample_op(py::handle tokens, py::handle token_logprobs, py::handle top_ids, py::handle top_logprobs,
               py::handle logits, py::handle params, py::handle history_offsets, py::handle history_ids,
               py::handle history_table, int64_t logprobs, uintptr_t stream, const std::string& kernel_spec,
               const std::string& config) {
  const char* L = kSample;
  ArrayView lv = cuda_array(logits, DType::kFloat32, 2, {L, "logits"}, -1);
  const int64_t rows = checked_rows(lv.shape[0], L), vocab = lv.shape[1];
  ArrayView pv = cuda_array(params, DType::kUInt8, 2, {L, "params"}, lv.device);
  require_shape(pv, {rows, int64_t(sizeof(sampling::RowParams))}, {L, "params"});
  ArrayView tv = cuda_array(tokens, DType::kInt32, 1, {L, "tokens"}, lv.device);
  require_shape(tv, {rows}, {L, "tokens"});
  ArrayView sv = cuda_array(token_logprobs, DType::kFloat32, 1, {L, "token_logprobs"}, lv.device);
  require_shape(sv, {rows}, {L, "token_logprobs"});
  if (logprobs < 0 || logprobs > sampling::kMaxLogprobs) {
    throw py::value_error(std::string(L) + ": logprobs must be in [0, " + std::to_string(sampling::kMaxLogprobs) +
                          "], got " + std::to_string(logprobs));
  }
  if ((logprobs > 0) != !top_ids.is_none() || top_ids.is_none() != top_logprobs.is_none()) {
    throw py::value_error(std::string(L) + ": pass top_ids and top_logprobs exactly when logprobs > 0");
  }
  ArrayView iv, gv;
  if (logprobs > 0) {
    iv = cuda_array(top_ids, DType::kInt32, 2, {L, "top_ids"}, lv.device);
    require_shape(iv, {rows, logprobs}, {L, "top_ids"});
    gv = cuda_array(top_logprobs, DType::kFloat32, 2, {L, "top_logprobs"}, lv.device);
    require_shape(gv, {rows, logprobs}, {L, "top_logprobs"});
  }
  const bool history = !history_offsets.is_none();
  if (history_ids.is_none() == history || history_table.is_none() == history) {
    throw py::value_error(std::string(L) + ": pass history_offsets, history_ids and history_table together");
  }
  ArrayView ov, hv, xv;
  if (history) {
    ov = cuda_array(history_offsets, DType::kInt32, 1, {L, "history_offsets"}, lv.device);
    require_shape(ov, {rows + 1}, {L, "history_offsets"});
    hv = cuda_array(history_ids, DType::kInt32, 1, {L, "history_ids"}, lv.device);
    xv = cuda_array(history_table, DType::kInt32, 1, {L, "history_table"}, lv.device);
    if (xv.numel() * 4 < sampling::history_table_bytes(hv.numel())) {
      throw py::value_error(std::string(L) + ": history_table must hold 4 int32 per history id (" +
                            std::to_string(4 * hv.numel()) + "), got " + xv.shape_text());
    }
  }
  SampleShape& p = sample_shape(vocab, logprobs);
  p.check_kernel_spec(kernel_spec, L);
  const int device = resolve_devices({{&lv, {L, "logits"}},
                                      {&pv, {L, "params"}},
                                      {&tv, {L, "tokens"}},
                                      {&sv, {L, "token_logprobs"}},
                                      {logprobs > 0 ? &iv : nullptr, {L, "top_ids"}},
                                      {logprobs > 0 ? &gv : nullptr, {L, "top_logprobs"}},
                                      {history ? &ov : nullptr, {L, "history_offsets"}},
                                      {history ? &hv : nullptr, {L, "history_ids"}},
                                      {history ? &xv : nullptr, {L, "history_table"}}});
  Runtime::get().use_gpu(device);
  if (rows == 0) return;
  const SampleShape::Chosen k = p.choose(rows, config);
  require_aligned(lv, sampling::logits_alignment(k.config), {L, "logits"});
  require_aligned(pv, kParamsAlignment, {L, "params"});
  sampling::Args a;
  a.tokens = tv.data, a.token_logprobs = sv.data, a.top_ids = logprobs > 0 ? iv.data : 0;
  a.top_logprobs = logprobs > 0 ? gv.data : 0, a.logits = lv.data, a.params = pv.data;
  a.history_offsets = history ? ov.data : 0, a.history_ids = history ? hv.data : 0;
  a.history_table = history ? xv.data : 0, a.rows = rows;
  launch(*k.kernel, sampling::make_call(k.spec, k.config, a), as_stream(stream));
}

// Room in the shape's workspace for launches of m's whole bucket (so a CUDA graph captured
// after a first call never grows it).
void reserve_workspace(ArgmaxShape& p, const ArgmaxShape::Chosen& k, int64_t rows, int device) {
  const int64_t cap = std::max<int64_t>(rows, int64_t(1) << Dispatcher::bucket_index(rows));
  p.workspace.reserve(sampling::workspace_bytes(k.spec, k.config, cap), device, "argmax workspace");
}

void argmax_op(py::handle tokens, py::handle logits, uintptr_t stream, const std::string& kernel_spec,
               const std::string& config) {
  const char* L = kArgmax;
  ArrayView lv = cuda_array(logits, DType::kFloat32, 2, {L, "logits"}, -1);
  const int64_t rows = checked_rows(lv.shape[0], L), vocab = lv.shape[1];
  ArrayView tv = cuda_array(tokens, DType::kInt32, 1, {L, "out"}, lv.device);
  require_shape(tv, {rows}, {L, "out"});
  ArgmaxShape& p = argmax_shape(vocab);
  p.check_kernel_spec(kernel_spec, L);
  const int device = resolve_devices({{&lv, {L, "logits"}}, {&tv, {L, "out"}}});
  Runtime& rt = Runtime::get();
  rt.use_gpu(device);
  if (rows == 0) return;
  const ArgmaxShape::Chosen k = p.choose(rows, config);
  require_aligned(lv, sampling::logits_alignment(k.config), {L, "logits"});
  reserve_workspace(p, k, rows, rt.ordinal());
  const sampling::ArgmaxArgs a{tv.data, lv.data, p.workspace.buffer.ptr(), rows};
  launch(*k.kernel, sampling::make_call(k.spec, k.config, a), as_stream(stream));
}

// A host float32 [rows, vocab] array (NumPy, a CPU torch tensor).
ArrayView host_logits(py::handle logits, const char* label) {
  const Arg arg{label, "logits"};
  ArrayView v = view_of(logits, arg);
  require_host(v, arg);
  require_dtype(v, DType::kFloat32, arg);
  require_ndim(v, 2, arg);
  require_contiguous(v, arg);
  return v;
}

ArrayView host_out(py::handle obj, DType dtype, std::vector<int64_t> shape, const char* label, const char* name) {
  const Arg arg{label, name};
  ArrayView v = view_of(obj, arg);
  require_host(v, arg);
  require_dtype(v, dtype, arg);
  require_contiguous(v, arg);
  require_shape(v, shape, arg);
  return v;
}

// cpu::sample_decision per row into host arrays; margins (float64 [rows], may be None): how
// close each row's decision came to its boundary, for comparing a GPU's choice.
void sample_host(py::handle tokens, py::handle token_logprobs, py::handle top_ids, py::handle top_logprobs,
                 py::handle margins, py::handle logits, const SamplingRows& s, int64_t logprobs) {
  const char* L = kSample;
  const ArrayView lv = host_logits(logits, L);
  const int64_t rows = lv.shape[0], vocab = lv.shape[1];
  if (rows != s.rows() || vocab != s.vocab) {
    throw py::value_error(std::string(L) + ": the settings are for " + std::to_string(s.rows()) + " rows of " +
                          std::to_string(s.vocab) + " logits, logits has shape " + lv.shape_text());
  }
  if (logprobs < s.max_logprobs || logprobs > sampling::kMaxLogprobs) {
    throw py::value_error(std::string(L) + ": logprobs must be in [" + std::to_string(s.max_logprobs) + ", " +
                          std::to_string(sampling::kMaxLogprobs) + "], got " + std::to_string(logprobs));
  }
  const ArrayView tv = host_out(tokens, DType::kInt32, {rows}, L, "tokens");
  const ArrayView sv = host_out(token_logprobs, DType::kFloat32, {rows}, L, "token_logprobs");
  ArrayView iv, gv, mv;
  if (logprobs > 0) {
    iv = host_out(top_ids, DType::kInt32, {rows, logprobs}, L, "top_ids");
    gv = host_out(top_logprobs, DType::kFloat32, {rows, logprobs}, L, "top_logprobs");
  }
  if (!margins.is_none()) mv = host_out(margins, DType::kFloat64, {rows}, L, "margins");
  const auto* x = reinterpret_cast<const float*>(lv.data);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::SampleDecision d;
    try {
      d = cpu::sample_decision(x + r * vocab, vocab, s.params[size_t(r)], s.prompt(r), s.output(r), s.steps[size_t(r)]);
    } catch (const InputError& e) {
      throw py::value_error(std::string(L) + ": " + e.what());
    }
    reinterpret_cast<int32_t*>(tv.data)[r] = d.sampled.token;
    reinterpret_cast<float*>(sv.data)[r] = d.sampled.logprob;
    if (!margins.is_none()) reinterpret_cast<double*>(mv.data)[r] = d.margin;
    for (int64_t j = 0; j < logprobs; ++j) {
      const bool has = j < int64_t(d.sampled.top.size());
      reinterpret_cast<int32_t*>(iv.data)[r * logprobs + j] = has ? d.sampled.top[size_t(j)].first : -1;
      reinterpret_cast<float*>(gv.data)[r * logprobs + j] =
          has ? d.sampled.top[size_t(j)].second : -std::numeric_limits<float>::infinity();
    }
  }
}

void argmax_host(py::handle tokens, py::handle logits) {
  const ArrayView lv = host_logits(logits, kArgmax);
  const int64_t rows = lv.shape[0], vocab = lv.shape[1];
  const ArrayView tv = host_out(tokens, DType::kInt32, {rows}, kArgmax, "out");
  const auto* x = reinterpret_cast<const float*>(lv.data);
  for (int64_t r = 0; r < rows; ++r) reinterpret_cast<int32_t*>(tv.data)[r] = cpu::argmax(x + r * vocab, vocab);
}

}  // namespace

void bind_sampling(py::module_& m) {
  py::class_<SamplingRows>(m, "SamplingRows")
      .def(py::init(&make_rows), py::arg("vocab"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
           py::arg("min_p"), py::arg("repetition_penalty"), py::arg("presence_penalty"), py::arg("frequency_penalty"),
           py::arg("seed"), py::arg("step"), py::arg("logprobs"), py::arg("prompt_tokens"), py::arg("output_tokens"))
      .def_property_readonly("rows", &SamplingRows::rows)
      .def_readonly("max_logprobs", &SamplingRows::max_logprobs)
      .def_property_readonly("history_entries", [](const SamplingRows& s) { return int64_t(s.ids.size()); })
      .def("row_params", &SamplingRows::row_params)
      .def("history_offsets", [](const SamplingRows& s) { return SamplingRows::as_bytes(s.offsets); })
      .def("history_ids", [](const SamplingRows& s) { return SamplingRows::as_bytes(s.ids); });
  m.def("sampling_spec", &spec_for, py::arg("op"), py::arg("vocab"), py::arg("logprobs"));
  m.def("sample", &sample_op, py::arg("tokens"), py::arg("token_logprobs"), py::arg("top_ids"), py::arg("top_logprobs"),
        py::arg("logits"), py::arg("params"), py::arg("history_offsets"), py::arg("history_ids"),
        py::arg("history_table"), py::arg("logprobs"), py::arg("stream"), py::arg("kernel_spec") = "",
        py::arg("config") = "");
  m.def("argmax", &argmax_op, py::arg("out"), py::arg("logits"), py::arg("stream"), py::arg("kernel_spec") = "",
        py::arg("config") = "");
  m.def("sample_host", &sample_host, py::arg("tokens"), py::arg("token_logprobs"), py::arg("top_ids"),
        py::arg("top_logprobs"), py::arg("margins"), py::arg("logits"), py::arg("rows"), py::arg("logprobs"));
  m.def("argmax_host", &argmax_host, py::arg("out"), py::arg("logits"));
}

}  // namespace onecat::python
