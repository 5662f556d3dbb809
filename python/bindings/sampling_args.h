// The sampling keywords onecat.Model.generate and onecat.LLM's request calls take (vLLM's
// SamplingParams names), declared once: the pybind11 arguments and the SamplingParams they make.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <tuple>

#include "runtime/cpu/sampling.h"

namespace onecat::python {

namespace py = pybind11;

// py::args: the call's leading arguments (`leading`), then keyword-only temperature (its
// default differs: Model.generate greedy, LLM vLLM's 1), top_k, top_p, min_p,
// repetition_penalty, presence_penalty, frequency_penalty, seed and stop_ids, in the order the
// bound function takes them (sampling_params' arguments but logprobs, then stop_ids).
template <class... Leading>
auto sampling_kwargs(float temperature, Leading... leading) {
  return std::make_tuple(leading..., py::kw_only(), py::arg("temperature") = temperature, py::arg("top_k") = 0,
                         py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f, py::arg("repetition_penalty") = 1.0f,
                         py::arg("presence_penalty") = 0.0f, py::arg("frequency_penalty") = 0.0f, py::arg("seed") = 0,
                         py::arg("stop_ids") = py::none());
}

inline cpu::SamplingParams sampling_params(float temperature, int top_k, float top_p, float min_p,
                                           float repetition_penalty, float presence_penalty, float frequency_penalty,
                                           uint64_t seed, int logprobs = 0) {
  cpu::SamplingParams p;
  p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p;
  p.repetition_penalty = repetition_penalty, p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty, p.seed = seed, p.logprobs = logprobs;
  return p;
}

}  // namespace onecat::python
