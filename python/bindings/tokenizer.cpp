// onecat.Tokenizer and onecat.DecodeStream: models/tokenizer for Python (docs/tokenizer.md).
#include "models/tokenizer/tokenizer.h"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "models/checkpoint/locate.h"
#include "models/tokenizer/decode_stream.h"
#include "python/bindings/families.h"

namespace onecat::python {

void bind_tokenizer(py::module_& m) {
  using tokenizer::DecodeStream;
  using tokenizer::Tokenizer;
  py::class_<Tokenizer>(m, "Tokenizer", "A checkpoint's tokenizer: ids identical to Hugging Face tokenizers")
      .def(py::init([](const std::filesystem::path& model) {
             return Tokenizer::load(models::locate_checkpoint(model.string()));  // a hub id: its cached snapshot
           }),
           py::arg("model"), "Load a checkpoint directory (tokenizer.json) or a .gguf file's tokenizer")
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_special_tokens) {
            py::gil_scoped_release release;
            return t.encode(text, add_special_tokens);
          },
          py::arg("text"), py::arg("add_special_tokens") = true)
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special_tokens) {
            std::string text = t.decode(ids, skip_special_tokens);
            return py::str(text);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("bos_token_id", &Tokenizer::bos_token_id)
      .def_property_readonly("eos_token_ids", &Tokenizer::eos_token_ids)
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"))
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"))
      .def("is_special", &Tokenizer::is_special, py::arg("id"));
  py::class_<DecodeStream>(m, "DecodeStream", "Ids one at a time → the text each one completes")
      .def(py::init<Tokenizer, bool>(), py::arg("tokenizer"), py::arg("skip_special_tokens") = false)
      .def(
          "step", [](DecodeStream& s, int32_t id) { return py::str(s.step(id)); }, py::arg("id"))
      .def("finish", [](DecodeStream& s) { return py::str(s.finish()); });
}

}  // namespace onecat::python
