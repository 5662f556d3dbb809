// onecat.Model: a checkpoint loaded and run by models/model (docs/models.md) for Python, on
// the CPU backend or (device="cuda") the GPU one.
#include "models/model/model.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <tuple>

#include "base/error.h"
#include "models/checkpoint/locate.h"
#include "models/model/generate.h"
#include "models/model/generation_config.h"
#include "python/bindings/families.h"
#include "python/bindings/sampling_args.h"

namespace onecat::python {
namespace {

struct PyModel {
  std::unique_ptr<model::Model> model;
  std::vector<int32_t> eos;
};

py::dict config_dict(const models::ModelConfig& c) {
  py::dict d;
  d["name"] = c.name;
  d["architecture"] = c.architecture;
  d["hidden_size"] = c.hidden;
  d["intermediate_size"] = c.intermediate;
  d["num_hidden_layers"] = c.layers;
  d["num_attention_heads"] = c.heads;
  d["num_key_value_heads"] = c.kv_heads;
  d["head_dim"] = c.head_dim;
  d["vocab_size"] = c.vocab;
  d["rms_norm_eps"] = c.rms_norm_eps;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  d["sliding_window"] = c.sliding_window;
  d["max_position_embeddings"] = c.max_position_embeddings;
  d["rope_theta"] = c.rope.theta;
  d["quant_method"] = std::string(models::quant_method_name(c.quant.method));
  return d;
}

}  // namespace

model::Device python_device(const std::string& name) {
  const model::Device d = model::parse_device(name);
  if (const std::string note = model::auto_device_note(name); !note.empty()) {
    if (PyErr_WarnEx(PyExc_RuntimeWarning, ("onecat: " + note).c_str(), 2) != 0) throw py::error_already_set();
  }
  return d;
}

void bind_model(py::module_& m) {
  m.def(
      "check_quantization",
      [](const std::string& model, const std::string& name) {
        const std::string dir = models::locate_checkpoint(model);
        models::check_quantization(name, models::load_model(dir), dir);
      },
      py::arg("model"), py::arg("quantization"),
      "ValueError unless `quantization` (vLLM's names) is the method the checkpoint declares");
  auto cls =
      py::class_<PyModel>(m, "Model",
                          "A Hugging Face checkpoint loaded for generation on the CPU or a GPU (docs/models.md)")
          .def(py::init([](const std::string& path_or_id, const std::string& device, int64_t max_batch_tokens,
                           int64_t kv_cache_tokens, bool progress) {
                 const std::string path = models::locate_checkpoint(path_or_id);  // a hub id: its cached snapshot
                 model::ModelOptions o;
                 o.device = python_device(device);
                 o.max_batch_tokens = max_batch_tokens;
                 o.kv_cache_tokens = kv_cache_tokens;
                 o.max_sequences = 1;
                 o.progress = progress;
                 auto p = std::make_unique<PyModel>();
                 {
                   py::gil_scoped_release release;
                   p->model = model::Model::load(path, o);
                   p->eos = model::eos_token_ids(path);
                 }
                 return p;
               }),
               py::arg("path"), py::arg("device") = "auto", py::kw_only(), py::arg("max_batch_tokens") = 256,
               py::arg("kv_cache_tokens") = 4096, py::arg("progress") = false)
          .def_property_readonly("config", [](const PyModel& p) { return config_dict(p.model->config()); })
          .def_property_readonly("vocab_size", [](const PyModel& p) { return p.model->config().vocab; })
          .def_property_readonly("eos_token_ids", [](const PyModel& p) { return p.eos; })
          .def(
              "logits",
              [](PyModel& p, const std::vector<int32_t>& ids, bool last_only, int64_t decode_tail) {
                const int64_t vocab = p.model->config().vocab;
                if (decode_tail < 0 || decode_tail >= int64_t(ids.size())) {
                  throw py::value_error("onecat.Model.logits: decode_tail must be in 0.." +
                                        std::to_string(std::max<int64_t>(int64_t(ids.size()) - 1, 0)) + ", got " +
                                        std::to_string(decode_tail));
                }
                std::vector<float> out;
                {
                  py::gil_scoped_release release;
                  model::Sequence s;
                  try {
                    // The head in prefill chunks, then each tail token as a decode step of its own.
                    const size_t head = ids.size() - size_t(decode_tail);
                    out = p.model->extend(s, std::span<const int32_t>(ids.data(), head), !last_only);
                    if (last_only && decode_tail > 0) out.clear();
                    for (size_t i = head; i < ids.size(); ++i) {
                      std::vector<float> row = p.model->extend(s, std::span<const int32_t>(&ids[i], 1), true);
                      if (!last_only || i + 1 == ids.size()) out.insert(out.end(), row.begin(), row.end());
                    }
                  } catch (...) {
                    p.model->release(s);
                    throw;
                  }
                  p.model->release(s);
                }
                const py::ssize_t rows = py::ssize_t(out.size()) / py::ssize_t(vocab);
                py::array_t<float> a({rows, py::ssize_t(vocab)});
                std::copy(out.begin(), out.end(), a.mutable_data());
                return a;
              },
              py::arg("ids"), py::arg("last_only") = false, py::arg("decode_tail") = 0,
              "float32 logits [len(ids), vocab] of a fresh sequence `ids` (only the last row with last_only=True); "
              "the last decode_tail ids go through one decode step each, the rest through chunked prefill");
  std::apply(
      [&](auto... a) {
        cls.def(
            "generate",
            [](PyModel& p, const std::vector<int32_t>& prompt_ids, int64_t max_tokens, float temperature, int top_k,
               float top_p, float min_p, float repetition_penalty, float presence_penalty, float frequency_penalty,
               uint64_t seed, std::optional<std::vector<int32_t>> stop_ids) {
              model::GenerateOptions g;
              g.max_tokens = max_tokens;
              g.sampling = sampling_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                           frequency_penalty, seed);
              g.stop_ids = stop_ids ? *stop_ids : p.eos;
              py::gil_scoped_release release;
              return model::generate(*p.model, prompt_ids, g).tokens;
            },
            a...,
            "New token ids after prompt_ids (greedy at temperature 0), ending at a stop id (default: the "
            "checkpoint's EOS ids; [] for none) or after max_tokens");
      },
      sampling_kwargs(0.0f, py::arg("prompt_ids"), py::arg("max_tokens") = 64));
}

}  // namespace onecat::python
