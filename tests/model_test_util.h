// What the model tests share (tests/model_forward_test.cpp on the CPU, tests/gpu_model_test.cpp on
// a GPU): tiny checkpoints written once per process by tools/make_tiny_checkpoint.py, models
// sized for a test, prompts, logits step by step, and the distance between two sets of logits
// with its bounds.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/checkpoint/loaded_model.h"
#include "models/model/model.h"
#include "test_util.h"

namespace onecat {
namespace {

using model::Model;
using model::ModelOptions;
using model::Sequence;
using models::LoadedModel;

inline std::string python() {
  if (const char* p = std::getenv("ONECAT_PYTHON"); p && *p) return p;
  const std::string venv = std::string(ONECAT_SOURCE_DIR) + "/.venv/bin/python";
  return std::filesystem::exists(venv) ? venv : "python3";
}

// Writes a tiny checkpoint with make_tiny_checkpoint.py `args` into `dir`.
inline void make_checkpoint(const std::string& dir, const std::string& args) {
  const std::string cmd = python() + " " + ONECAT_SOURCE_DIR + "/tools/make_tiny_checkpoint.py " + dir + " " + args;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
}

// Tiny checkpoints, each written once per process.
class Checkpoints {
 public:
  static std::string get(const std::string& args) {
    static Checkpoints instance;
    auto it = instance.made_.find(args);
    if (it != instance.made_.end()) return it->second;
    const std::string dir = instance.dir_ / ("c" + std::to_string(instance.made_.size()));
    make_checkpoint(dir, args);
    return instance.made_[args] = dir;
  }
  static std::string of(const std::string& arch, const std::string& format) {
    return get("--arch " + arch + " --format " + format);
  }

 private:
  test::TempDir dir_;
  std::map<std::string, std::string> made_;
};

// The tiny checkpoints the forward tests run (CPU consistency, GPU against CPU): every
// architecture × format, and the RoPE scalings and sliding window beyond the defaults.
struct ModelCase {
  std::string arch, format, extra;  // extra: more make_tiny_checkpoint.py arguments
  std::string args() const { return "--arch " + arch + " --format " + format + (extra.empty() ? "" : " " + extra); }
};
inline void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.args(); }

inline std::vector<ModelCase> all_model_cases() {
  std::vector<ModelCase> out;
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3"}) {
    for (const char* f :
         {"f16", "bf16", "awq4", "gptq4", "gptq4-act", "fp8", "fp8-channel", "fp8-b32", "nvfp4", "mxfp4"})
      out.push_back({arch, f, ""});
  }
  out.push_back({"llama", "f16", "--rope linear"});
  out.push_back({"qwen2", "f16", "--rope yarn"});
  out.push_back({"qwen3", "bf16", "--rope yarn-v5"});
  out.push_back({"mistral", "f16", "--sliding-window 48"});
  // Phi-3: q|k|v and gate|up fused in the checkpoint, each quantised as one linear.
  for (const char* f : {"f16", "bf16", "awq4", "gptq4-act", "fp8", "nvfp4", "mxfp4"}) out.push_back({"phi3", f, ""});
  out.push_back({"phi3", "f16", "--sliding-window 48"});
  // llm-compressor's compressed-tensors checkpoints: the same kernels, other tensors and zero points.
  for (const char* f : {"ct-w4a16-asym", "ct-fp8-tensor", "ct-nvfp4"}) out.push_back({"llama", f, ""});
  out.push_back({"qwen3", "ct-w4a16-act", ""});
  // Granite: its four multipliers folded into the weights at load.
  for (const char* f : {"f16", "awq4", "nvfp4"}) out.push_back({"granite", f, ""});
  return out;
}

// Qwen3-MoE in every format (awq4 keeps one expert's down_proj unquantised, as
// modules_to_not_convert can), Qwen2-MoE (a shared expert) in three, decisive routing as its goldens
// (tools/golden_logits.py); `extra` e.g. --decisive-routing.
inline std::vector<ModelCase> moe_model_cases(const std::string& extra = "") {
  std::vector<ModelCase> out;
  for (const char* f : {"f16", "bf16", "awq4", "gptq4", "gptq4-act", "fp8", "fp8-channel", "fp8-b32", "nvfp4", "mxfp4"})
    out.push_back({"qwen3moe", f, extra});
  for (const char* f : {"f16", "awq4", "nvfp4"}) out.push_back({"qwen2moe", f, "--decisive-routing"});
  for (const char* f : {"f16", "awq4", "fp8"}) out.push_back({"mixtral", f, "--decisive-routing"});
  return out;
}

// A gtest parameter name: "qwen3_bf16_rope_yarn_v5".
inline std::string model_case_name(const testing::TestParamInfo<ModelCase>& info) {
  const ModelCase& c = info.param;
  const std::string s = c.arch + "_" + c.format + (c.extra.empty() ? "" : "_" + c.extra);
  std::string out;
  for (char ch : s) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      out += ch;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  return out;
}

inline LoadedModel load(const std::string& dir) { return models::load_checkpoint(dir, {.progress = false}); }

inline ModelOptions options(int64_t max_batch_tokens, int64_t kv_cache_tokens = 2048, int page_size = 16) {
  ModelOptions o;
  o.max_batch_tokens = max_batch_tokens;
  o.kv_cache_tokens = kv_cache_tokens;
  o.page_size = page_size;
  o.max_sequences = 4;
  o.progress = false;
  return o;
}

inline std::vector<int32_t> random_prompt(int64_t length, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  std::vector<int32_t> out(static_cast<size_t>(length));
  for (auto& t : out) t = id(rng);
  return out;
}

// The logits of every prompt position, the prompt prefilled in chunks of `chunks` (cycled),
// then its last `decodes` tokens one decode step each.
inline std::vector<float> logits_by_steps(Model& m, const std::vector<int32_t>& prompt,
                                          const std::vector<size_t>& chunks, size_t decodes) {
  Sequence s;
  std::vector<float> out;
  size_t at = 0, c = 0;
  const size_t prefill_end = prompt.size() - decodes;
  while (at < prompt.size()) {
    const size_t n = at < prefill_end ? std::min(chunks[c++ % chunks.size()], prefill_end - at) : 1;
    const std::vector<float> l = m.extend(s, std::span(prompt).subspan(at, n), true);
    out.insert(out.end(), l.begin(), l.end());
    at += n;
  }
  m.release(s);
  return out;
}

// The rows of `all` ([positions][vocab]) at `positions`, in that order.
inline std::vector<float> rows_at(const std::vector<float>& all, const std::vector<size_t>& positions, int64_t vocab) {
  std::vector<float> out;
  for (size_t p : positions) {
    out.insert(out.end(), all.begin() + std::ptrdiff_t(p * size_t(vocab)),
               all.begin() + std::ptrdiff_t((p + 1) * size_t(vocab)));
  }
  return out;
}

// Speculative-decoding steps over the prompts (at least 5, each at least 40 tokens; the model
// takes 8 sequences and 64-token steps): each prefilled to 20 tokens, then a mixed step given
// in shuffled order — a decode, verify blocks of 2, 3 and 5 tokens and a 7-token prefill chunk —
// then two steps of verify blocks alone: 4 tokens for all five, 3 tokens for the first three
// (uniform steps: CUDA graphs where the model has them). Per prompt, the logits of the rows the
// steps returned and the prompt positions they belong to.
struct VerifyFlow {
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<size_t>> positions;
};
inline VerifyFlow verify_flow(Model& m, const std::vector<std::vector<int32_t>>& prompts) {
  const size_t n = prompts.size();
  std::vector<Sequence> seqs(n);
  VerifyFlow f{std::vector<std::vector<float>>(n), std::vector<std::vector<size_t>>(n)};
  for (size_t i = 0; i < n; ++i) m.extend(seqs[i], std::span(prompts[i]).subspan(0, 20));
  auto step = [&](const std::vector<std::pair<size_t, std::pair<size_t, bool>>>& blocks) {
    std::vector<Model::Chunk> chunks;
    for (const auto& [i, what] : blocks) {
      chunks.push_back({&seqs[i], std::span(prompts[i]).subspan(size_t(seqs[i].length), what.first), what.second});
    }
    const std::vector<size_t> start = [&] {
      std::vector<size_t> v;
      for (const auto& [i, what] : blocks) v.push_back(size_t(seqs[i].length));
      return v;
    }();
    const std::vector<std::vector<float>> out = m.step(chunks);
    for (size_t k = 0; k < blocks.size(); ++k) {
      const auto& [i, what] = blocks[k];
      f.logits[i].insert(f.logits[i].end(), out[k].begin(), out[k].end());
      const size_t rows = what.second ? what.first : 1;
      for (size_t r = 0; r < rows; ++r) f.positions[i].push_back(start[k] + what.first - rows + r);
    }
  };
  step({{3, {5, true}}, {4, {7, false}}, {1, {2, true}}, {0, {1, false}}, {2, {3, true}}});
  step({{0, {4, true}}, {1, {4, true}}, {2, {4, true}}, {3, {4, true}}, {4, {4, true}}});
  step({{2, {3, true}}, {0, {3, true}}, {1, {3, true}}});
  for (Sequence& s : seqs) m.release(s);
  return f;
}

// ---------------------------------------------------------------------------------------------
// The metric against transformers.
//
// Per logit row: (1) max |Δlogit| divided by the reference row's spread (max − min), which is
// scale-free and catches any single wrong logit, and (2) KL(softmax(ref) ‖ softmax(got)), what
// sampling sees (not scale-free: the tied Qwen3 checkpoints' logits are 16× larger, so their
// KL is the largest). A case passes when every row is within both bounds. The CPU forward
// differs from an exact one by rounding activations to fp16 between ops: on these checkpoints
// at most 7·10⁻⁴ of the spread and a KL of 2.3·10⁻⁴ (measured against golden_logits.py's fp64
// numpy forward, every case). The smallest perturbation MetricHasPower makes, RoPE theta
// × 1.01, moves the logits of 1024-token prompts by 5.4·10⁻³ to 2·10⁻² of the spread; swapping
// layers or the GQA mapping by 0.35 or more (KL ≥ 0.24). The bounds sit about 3× from both sides.
constexpr double kMaxRelativeError = 2e-3;
constexpr double kMaxKl = 1e-3;

struct Distance {
  double relative_error = 0, kl = 0;
  bool passes() const { return relative_error <= kMaxRelativeError && kl <= kMaxKl; }
};

inline std::ostream& operator<<(std::ostream& os, const Distance& d) {
  return os << "max |Δ|/spread " << d.relative_error << " (bound " << kMaxRelativeError << "), max KL " << d.kl
            << " (bound " << kMaxKl << ")";
}

inline Distance distance(const float* got, const float* want, int64_t rows, int64_t vocab) {
  Distance d;
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = got + r * vocab;
    const float* w = want + r * vocab;
    double lo = w[0], hi = w[0], err = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      lo = std::min(lo, double(w[i]));
      hi = std::max(hi, double(w[i]));
      err = std::max(err, std::fabs(double(g[i]) - double(w[i])));
    }
    d.relative_error = std::max(d.relative_error, err / (hi - lo));
    double gmax = g[0], wmax = w[0];
    for (int64_t i = 0; i < vocab; ++i) {
      gmax = std::max(gmax, double(g[i]));
      wmax = std::max(wmax, double(w[i]));
    }
    double gz = 0, wz = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      gz += std::exp(double(g[i]) - gmax);
      wz += std::exp(double(w[i]) - wmax);
    }
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      const double lw = double(w[i]) - wmax - std::log(wz), lg = double(g[i]) - gmax - std::log(gz);
      kl += std::exp(lw) * (lw - lg);
    }
    d.kl = std::max(d.kl, kl);
  }
  return d;
}

}  // namespace
}  // namespace onecat
