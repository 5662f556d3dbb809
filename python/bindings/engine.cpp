// onecat.LLM: the serving engine (engine/, docs/engine.md) for Python — many requests through
// one model with continuous batching, chunked prefill and the prefix cache, on the CPU backend
// or (device="cuda") the GPU one. A step runs without the GIL.
#include "engine/engine.h"

#include <pybind11/stl.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "engine/draft_model.h"
#include "engine/grammar.h"
#include "models/chat/ordered_json.h"
#include "models/checkpoint/locate.h"
#include "models/model/generation_config.h"
#include "models/tokenizer/tokenizer.h"
#include "python/bindings/families.h"
#include "python/bindings/sampling_args.h"

namespace onecat::python {
namespace {

struct PyLLM {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<engine::Engine> engine;
  std::vector<int32_t> eos;
  std::string path;  // the checkpoint directory (its tokenizer for text prompts, onecat/_engine.py)
  std::shared_ptr<engine::GrammarCache> grammars;  // structured outputs, made at the first request that asks
  model::SamplingDefaults defaults;                // generation_config's (get_default_sampling_params)
};

// Structured outputs (docs/serve.md): a request's grammar from one of a JSON schema's text, a
// list of choices or any JSON object; nullptr when none is asked.
std::shared_ptr<engine::GrammarAutomaton> grammar_of(PyLLM& p, const std::optional<std::string>& json_schema,
                                                     const std::optional<std::string>& regex,
                                                     const std::optional<std::vector<std::string>>& choice,
                                                     bool json_object) {
  if (int(json_schema.has_value()) + int(regex.has_value()) + int(choice.has_value()) + int(json_object) > 1) {
    throw InputError("give one of json_schema, regex, choice and json_object.");
  }
  if (!json_schema && !regex && !choice && !json_object) return nullptr;
  if (!p.grammars) {
    if (!std::filesystem::exists(std::filesystem::path(p.path) / "tokenizer.json")) {
      throw InputError("structured outputs need the checkpoint's tokenizer.json, which " + p.path + " lacks.");
    }
    p.grammars = std::make_shared<engine::GrammarCache>(
        engine::TokenVocabulary::of(tokenizer::Tokenizer::from_hf_directory(p.path), p.model->config().vocab));
  }
  if (json_object) return p.grammars->json_object();
  if (regex) return p.grammars->regex(*regex);
  if (choice) return p.grammars->choice(*choice);
  if (chat::json_nests_deeper(*json_schema, 64)) throw InputError("json_schema nests deeper than 64 levels.");
  nlohmann::ordered_json schema;
  try {
    schema = chat::parse_ordered_json(*json_schema);
  } catch (const nlohmann::json::exception&) {
    throw InputError("json_schema must be a JSON schema's text.");
  }
  return p.grammars->json_schema(schema);
}

struct Settings {
  int64_t max_tokens;
  cpu::SamplingParams sampling;
  std::optional<std::vector<int32_t>> stop_ids;
};

engine::Request request(const PyLLM& p, std::vector<int32_t> prompt, const Settings& s) {
  engine::Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = s.max_tokens;
  r.sampling = s.sampling;
  r.stop_ids = s.stop_ids ? *s.stop_ids : p.eos;
  return r;
}

// The request calls' keywords: the sampling ones, then logprobs (each new token's logprob and
// the n most likely, in its StepOutput), prompt_logprobs (every prompt token's, on the first
// StepOutput), logit_bias ({token id: bias in [−100, 100]}) and num_draft_tokens (this
// request's speculative k; None: the LLM's).
template <class... Leading>
auto request_kwargs(Leading... leading) {
  return std::tuple_cat(sampling_kwargs(1.0f, leading...),
                        std::make_tuple(py::arg("logprobs") = 0, py::arg("prompt_logprobs") = py::none(),
                                        py::arg("logit_bias") = py::none(), py::arg("num_draft_tokens") = py::none(),
                                        py::arg("json_schema") = py::none(), py::arg("regex") = py::none(),
                                        py::arg("choice") = py::none(), py::arg("json_object") = false));
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<engine::StepOutput>(m, "StepOutput", "One request's new token from LLM.step()")
      .def_readonly("id", &engine::StepOutput::id)
      .def_readonly("token", &engine::StepOutput::token, "−1 for a cancelled request")
      .def_readonly("finished", &engine::StepOutput::finished)
      .def_readonly("finish_reason", &engine::StepOutput::finish_reason, "'stop', 'length' or 'cancelled'")
      .def_readonly("logprob", &engine::StepOutput::logprob,
                    "With logprobs=n > 0: the token's logprob under the raw logits (else 0)")
      .def_readonly("top_logprobs", &engine::StepOutput::top_logprobs,
                    "With logprobs=n > 0: the n most likely (id, logprob), best first (else [])")
      .def_property_readonly(
          "prompt_logprobs",
          [](const engine::StepOutput& o) {
            std::vector<std::pair<float, std::vector<std::pair<int, float>>>> out;
            for (const engine::TokenLogprobs& t : o.prompt_logprobs) out.emplace_back(t.logprob, t.top);
            return out;
          },
          "With prompt_logprobs=n ≥ 0, on the request's first output: for prompt tokens 1 … P−1, (logprob, "
          "the n most likely (id, logprob)); else []")
      .def("__repr__", [](const engine::StepOutput& o) {
        return "StepOutput(id=" + std::to_string(o.id) + ", token=" + std::to_string(o.token) +
               ", finished=" + (o.finished ? "True" : "False") + ", finish_reason='" + o.finish_reason + "')";
      });

  auto cls = py::class_<PyLLM>(m, "LLM",
                               "Many requests through one checkpoint at once: continuous batching, chunked prefill, "
                               "paged KV cache with prefix caching (docs/engine.md)");
  cls.def(py::init([](const std::string& path_or_id, const std::string& device, std::optional<int> max_num_seqs,
                      std::optional<int64_t> max_num_batched_tokens, std::optional<int64_t> kv_cache_tokens,
                      double gpu_memory_utilization, bool prefix_caching, bool cuda_graphs, bool progress,
                      int num_speculative_tokens, int num_draft_tokens, const std::string& speculative,
                      int prompt_lookup_min, int prompt_lookup_max, float draft_p_min, bool device_sampling,
                      const std::string& kv_cache_dtype, int64_t max_model_len, const std::string& generation_config) {
            const std::string path = models::locate_checkpoint(path_or_id);  // a hub id: its cached snapshot
            // Checked before the weights load.
            model::SamplingDefaults defaults = model::sampling_defaults(path, generation_config);
            if (num_draft_tokens != 0 && num_speculative_tokens != 0 && num_draft_tokens != num_speculative_tokens) {
              throw InputError("num_speculative_tokens is num_draft_tokens' other name: give one of them.");
            }
            model::ModelOptions o;
            o.device = python_device(device);
            // None: the device's default — cuda 128 sequences, 2048-token steps and a pool that fills
            // gpu_memory_utilization (vLLM's way), cpu 8, 256 and 8192 tokens.
            const bool cuda = o.device == model::Device::kCuda;
            o.max_batch_tokens = max_num_batched_tokens.value_or(cuda ? 2048 : 256);
            o.max_sequences = max_num_seqs.value_or(cuda ? 128 : 8);
            o.kv_cache_tokens = kv_cache_tokens.value_or(cuda ? 0 : 8192);
            o.gpu_memory_utilization = gpu_memory_utilization;
            o.kv_cache_dtype = models::parse_kv_cache_dtype(kv_cache_dtype);
            o.max_model_len = max_model_len;
            o.cuda_graphs = cuda_graphs;
            o.progress = progress;
            engine::EngineOptions eo;
            eo.prefix_caching = prefix_caching;
            eo.num_speculative_tokens = num_draft_tokens != 0 ? num_draft_tokens : num_speculative_tokens;
            eo.speculative = speculative;
            eo.ngram_min = prompt_lookup_min, eo.ngram_max = prompt_lookup_max;
            eo.draft_p_min = draft_p_min;
            eo.device_sampling = device_sampling;
            engine::leave_room_for_draft(o, eo);  // a draft model's pool is as large as the target's
            auto p = std::make_unique<PyLLM>();
            {
              py::gil_scoped_release release;
              p->model = model::Model::load(path, o);
              p->eos = model::eos_token_ids(path);
            }
            p->path = path;
            p->defaults = defaults;
            {
              py::gil_scoped_release release;  // a draft model loads here
              p->engine = std::make_unique<engine::Engine>(*p->model, eo);
            }
            return p;
          }),
          py::arg("path"), py::arg("device") = "auto", py::kw_only(), py::arg("max_num_seqs") = py::none(),
          py::arg("max_num_batched_tokens") = py::none(), py::arg("kv_cache_tokens") = py::none(),
          py::arg("gpu_memory_utilization") = 0.9, py::arg("prefix_caching") = true, py::arg("cuda_graphs") = true,
          py::arg("progress") = false, py::arg("num_speculative_tokens") = 0, py::arg("num_draft_tokens") = 0,
          py::arg("speculative") = "ngram", py::arg("prompt_lookup_min") = 1, py::arg("prompt_lookup_max") = 4,
          py::arg("draft_p_min") = 0.0f, py::arg("device_sampling") = true, py::arg("kv_cache_dtype") = "auto",
          py::arg("max_model_len") = 0, py::arg("generation_config") = "auto");
  cls.def_property_readonly("eos_token_ids", [](const PyLLM& p) { return p.eos; });
  cls.def_property_readonly(
      "generation_defaults",
      [](const PyLLM& p) {
        const model::SamplingDefaults& d = p.defaults;
        // The file's decimal (0.6, not float 0.6's 0.60000002).
        auto decimal = [](float v) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.7g", double(v));
          return std::strtod(buf, nullptr);
        };
        py::dict out;
        if (d.temperature) out["temperature"] = decimal(*d.temperature);
        if (d.top_k) out["top_k"] = *d.top_k;
        if (d.top_p) out["top_p"] = decimal(*d.top_p);
        if (d.min_p) out["min_p"] = decimal(*d.min_p);
        if (d.repetition_penalty) out["repetition_penalty"] = decimal(*d.repetition_penalty);
        if (d.max_tokens) out["max_tokens"] = *d.max_tokens;
        return out;
      },
      "The sampling the checkpoint recommends (generation_config.json, per generation_config=): the "
      "SamplingParams fields get_default_sampling_params() sets");
  cls.def_property_readonly(
      "model_path", [](const PyLLM& p) { return p.path; }, "The checkpoint directory");
  cls.def_property_readonly("vocab_size", [](const PyLLM& p) { return p.model->config().vocab; });
  cls.def_property_readonly("max_model_len", [](const PyLLM& p) { return p.model->max_model_len(); });
  cls.def_property_readonly("idle", [](const PyLLM& p) { return p.engine->idle(); });
  cls.def_property_readonly("stats", [](const PyLLM& p) {
    const engine::EngineStats& s = p.engine->stats();
    py::dict d;
    d["steps"] = s.steps, d["preemptions"] = s.preemptions, d["prompt_tokens"] = s.prompt_tokens;
    d["prefix_hit_tokens"] = s.prefix_hit_tokens, d["computed_tokens"] = s.computed_tokens;
    d["generated_tokens"] = s.generated_tokens;
    d["sampled_steps"] = s.sampled_steps, d["device_sampled_steps"] = s.device_sampled_steps;
    d["draft_tokens"] = s.draft_tokens, d["accepted_tokens"] = s.accepted_tokens, d["draft_rounds"] = s.draft_rounds;
    d["drafted_at"] = s.drafted_at, d["accepted_at"] = s.accepted_at;
    // The KV pool: pages in all, those a new request can take (free or cached and unused), and
    // those in the prefix cache.
    d["pages"] = p.engine->blocks().pages(), d["available_pages"] = p.engine->blocks().available();
    d["cached_pages"] = p.engine->blocks().cached();
    return d;
  });
  std::apply(
      [&](auto... a) {
        cls.def(
            "add_request",
            [](PyLLM& p, std::vector<int32_t> prompt_ids, int64_t max_tokens, float temperature, int top_k, float top_p,
               float min_p, float repetition_penalty, float presence_penalty, float frequency_penalty, uint64_t seed,
               std::optional<std::vector<int32_t>> stop_ids, int logprobs, std::optional<int> prompt_logprobs,
               std::optional<std::map<int32_t, float>> logit_bias, std::optional<int> num_draft_tokens,
               std::optional<std::string> json_schema, std::optional<std::string> regex,
               std::optional<std::vector<std::string>> choice, bool json_object) {
              Settings s{max_tokens,
                         sampling_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                         frequency_penalty, seed, logprobs),
                         std::move(stop_ids)};
              if (logit_bias) s.sampling.logit_bias.assign(logit_bias->begin(), logit_bias->end());
              engine::Request r = request(p, std::move(prompt_ids), s);
              if (prompt_logprobs) r.prompt_logprobs = *prompt_logprobs;
              if (num_draft_tokens) r.num_draft_tokens = *num_draft_tokens;
              if (auto grammar = grammar_of(p, json_schema, regex, choice, json_object)) {
                r.constraint = std::make_shared<engine::GrammarConstraint>(grammar, r.stop_ids);
              }
              return p.engine->add(std::move(r));
            },
            a...,
            "Queues a request; its id. Its tokens come from step(), ending at a stop id (default: the checkpoint's "
            "EOS ids; [] for none) or after max_tokens. Structured output (one of): json_schema (a JSON schema's "
            "text), regex (a regular expression's whole matches), choice (a list of strings) or json_object=True; the "
            "request then ends when its text is whole "
            "(docs/serve.md, Structured outputs)");
      },
      request_kwargs(py::arg("prompt_ids"), py::arg("max_tokens") = 64));
  cls.def(
      "step",
      [](PyLLM& p) {
        py::gil_scoped_release release;
        return p.engine->step();
      },
      "Runs one forward step; the requests it advanced, each with its new token");
  cls.def(
      "cancel", [](PyLLM& p, int64_t id) { return p.engine->cancel(id); }, py::arg("id"),
      "Ends a request now (reported finished by the next step); False when it is not running or queued");
  std::apply(
      [&](auto... a) {
        cls.def(
            "generate",
            [](PyLLM& p, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens, float temperature,
               int top_k, float top_p, float min_p, float repetition_penalty, float presence_penalty,
               float frequency_penalty, uint64_t seed, std::optional<std::vector<int32_t>> stop_ids) {
              if (!p.engine->idle()) throw InputError("generate() needs an idle LLM: finish or cancel its requests.");
              std::map<int64_t, size_t> index;
              for (size_t i = 0; i < prompts.size(); ++i) {
                // Request i samples from seed + i, so equal prompts still draw their own tokens.
                const Settings s{max_tokens,
                                 sampling_params(temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
                                                 frequency_penalty, seed + i),
                                 stop_ids};
                try {
                  index[p.engine->add(request(p, prompts[i], s))] = i;
                } catch (...) {
                  for (const auto& [id, at] : index) p.engine->cancel(id);
                  while (!p.engine->idle()) p.engine->step();
                  throw;
                }
              }
              std::vector<std::vector<int32_t>> out(prompts.size());
              py::gil_scoped_release release;
              while (!p.engine->idle()) {
                for (const engine::StepOutput& o : p.engine->step()) out[index.at(o.id)].push_back(o.token);
              }
              return out;
            },
            a...,
            "The new token ids of every prompt, run together; request i samples with seed + i (vLLM's sampling "
            "defaults: temperature 1; 0 is greedy)");
      },
      sampling_kwargs(1.0f, py::arg("prompts"), py::arg("max_tokens") = 64));
}

}  // namespace onecat::python
