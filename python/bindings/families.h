// Each kernel family's bindings: one file python/bindings/<family>.cpp defining
// bind_<family>(m), listed here and called from module.cpp, plus one Python module
// python/onecat/families/<family>.py (docs/python.md, "Adding a family").
#pragma once
#include <pybind11/pybind11.h>

#include <string>

#include "models/model/model.h"

namespace onecat::python {

namespace py = pybind11;

void bind_core(py::module_& m);  // info, emit, compile, tune, prepare, cache
void bind_rmsnorm(py::module_& m);
void bind_gemm(py::module_& m);
void bind_attention(py::module_& m);
void bind_embedding(py::module_& m);
void bind_rope(py::module_& m);
void bind_sampling(py::module_& m);
void bind_moe(py::module_& m);
void bind_tokenizer(py::module_& m);      // not a kernel family: Tokenizer, DecodeStream
void bind_chat_template(py::module_& m);  // not a kernel family: ChatTemplate, load_chat_template
void bind_model(py::module_& m);   // not a kernel family: Model
void bind_engine(py::module_& m);  // not a kernel family: LLM, StepOutput

// Model's and LLM's device argument: "auto" (the default), "cuda" or "cpu"; auto without a GPU
// runs on the CPU and says so with a RuntimeWarning.
model::Device python_device(const std::string& name);

}  // namespace onecat::python
