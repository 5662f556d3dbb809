// embedding bindings: out[t] = table[ids[t] − vocab_start], a zero row for an id outside the
// table's slice (codegen/embedding, docs/embedding.md).
#include <array>
#include <climits>
#include <map>

#include "base/error.h"
#include "codegen/embedding/emit.h"
#include "codegen/embedding/op.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/prepared.h"
#include "python/bindings/runtime.h"

namespace onecat::python {
namespace {

constexpr const char* kOp = "onecat.embedding";

std::string spec_for(int64_t vocab, int64_t hidden) {
  const std::string text = "embedding:vocab=" + std::to_string(vocab) + ",hidden=" + std::to_string(hidden);
  try {
    return embedding::Spec::parse(text).to_string();
  } catch (const InputError& e) {
    throw py::value_error(std::string(kOp) + ": a table of shape (" + std::to_string(vocab) + ", " +
                          std::to_string(hidden) + ") has no kernel: " + e.what());
  }
}

using Shape = PreparedShape<embedding::Spec, embedding::Config, embedding::Args>;

Shape& prepared(int64_t vocab, int64_t hidden) {
  using Key = std::array<int64_t, 2>;
  static auto* table = new std::map<Key, Shape>();  // never destroyed, like the Session
  return prepared_shape(*table, Key{vocab, hidden}, [&] { return spec_for(vocab, hidden); });
}

// kernel_spec/config: set when a compiled kernel (onecat.compile) is called; empty to dispatch.
void embedding_op(py::handle out, py::handle table, py::handle ids, int64_t vocab_start, uintptr_t stream,
                  const std::string& kernel_spec, const std::string& config) {
  ArrayView tv = cuda_array(table, DType::kFloat16, 2, {kOp, "table"}, -1);
  ArrayView iv = cuda_array(ids, DType::kInt32, 1, {kOp, "ids"}, tv.device);
  const int64_t vocab = tv.shape[0], hidden = tv.shape[1], tokens = iv.shape[0];
  ArrayView ov = cuda_array(out, DType::kFloat16, 2, {kOp, "out"}, tv.device);
  require_shape(ov, {tokens, hidden}, {kOp, "out"});
  if (vocab_start < 0 || vocab_start > INT_MAX) {
    throw py::value_error(std::string(kOp) + ": vocab_start must be in [0, 2^31 - 1], got " +
                          std::to_string(vocab_start));
  }
  if (tokens > INT_MAX) throw py::value_error(std::string(kOp) + ": more than 2^31 - 1 ids");
  Shape& p = prepared(vocab, hidden);
  p.check_kernel_spec(kernel_spec, kOp);
  const int device = resolve_devices({{&tv, {kOp, "table"}}, {&iv, {kOp, "ids"}}, {&ov, {kOp, "out"}}});
  Runtime::get().use_gpu(device);
  if (tokens == 0) return;
  const Shape::Chosen k = p.choose(tokens, config);
  const int align = embedding::pointer_alignment(k.config);
  require_aligned(tv, align, {kOp, "table"});
  require_aligned(ov, align, {kOp, "out"});
  const embedding::Args a{ov.data, tv.data, iv.data, vocab_start, tokens};
  launch(*k.kernel, embedding::make_call(k.spec, k.config, a), as_stream(stream));
}

}  // namespace

void bind_embedding(py::module_& m) {
  m.def("embedding_spec", &spec_for, py::arg("vocab"), py::arg("hidden"));
  m.def("embedding", &embedding_op, py::arg("out"), py::arg("table"), py::arg("ids"), py::arg("vocab_start"),
        py::arg("stream"), py::arg("kernel_spec") = "", py::arg("config") = "");
}

}  // namespace onecat::python
