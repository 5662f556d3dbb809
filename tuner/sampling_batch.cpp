#include "tuner/sampling_batch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "runtime/cpu/parallel.h"
#include "tuner/random_weight.h"

namespace onecat {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool close(float got, float want, double tolerance) {
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(double(got) - double(want)) <= tolerance * std::max(1.0, std::abs(double(want)));
}

std::string row_text(int64_t r, const cpu::SamplingParams& p, uint64_t step) {
  return "row " + std::to_string(r) + " (temperature " + std::to_string(p.temperature) + ", top_k " +
         std::to_string(p.top_k) + ", top_p " + std::to_string(p.top_p) + ", min_p " + std::to_string(p.min_p) +
         ", repetition " + std::to_string(p.repetition_penalty) + ", seed " + std::to_string(p.seed) + ", step " +
         std::to_string(step) + ")";
}

}  // namespace

std::vector<sampling::RowParams> SamplingBatch::row_params() const {
  std::vector<sampling::RowParams> out;
  for (int64_t r = 0; r < rows; ++r)
    out.push_back(cpu::row_params(params[size_t(r)], steps[size_t(r)], prompt_lengths[size_t(r)]));
  return out;
}

SamplingBatch make_sampling_batch(int vocab, int64_t rows, int max_logprobs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  SamplingBatch b;
  b.vocab = vocab;
  b.rows = rows;
  b.logits.resize(size_t(rows) * size_t(vocab));
  auto uniform = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  const float temperatures[] = {0, 1e-6f, 0.05f, 0.7f, 1, 1.5f, 1e4f};
  const int ks[] = {0, -1, 1, 5, 50, std::max(1, vocab / 2), vocab + 3};
  const float ps[] = {1, 0.9f, 0.5f, 0.99f, 0.999f};
  const float min_ps[] = {0, 0.05f, 0.2f};
  b.offsets.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    // Logits: a sum of three uniforms (near normal) at the row's scale.
    const float scale = uniform(0.3f, 6);
    const int kind = int(rng() % 8);
    float* row = b.logits.data() + r * vocab;
    SplitMix64 mix{rng()};
    for (int i = 0; i < vocab; ++i) {
      float v = scale * 2 * (mix.uniform(0, 1) + mix.uniform(0, 1) + mix.uniform(0, 1) - 1.5f);
      if (kind == 1) v = std::round(v);  // ties everywhere
      row[i] = v;
    }
    if (kind == 2) {
      for (int j = 0; j < vocab / 2; ++j) row[mix.next() % uint64_t(vocab)] = kNegInf;
    }
    if (kind == 3) row[mix.next() % uint64_t(vocab)] = std::nanf("");
    if (kind == 4) row[mix.next() % uint64_t(vocab)] = row[mix.next() % uint64_t(vocab)] = scale * 4;  // a tied top
    if (r == 5) std::fill(row, row + vocab, kNegInf);

    cpu::SamplingParams p;
    p.temperature = temperatures[rng() % std::size(temperatures)];
    if (rng() % 2) p.top_k = ks[rng() % std::size(ks)];
    if (rng() % 2) p.top_p = ps[rng() % std::size(ps)];
    if (rng() % 3 == 0) p.min_p = min_ps[rng() % std::size(min_ps)];
    std::vector<int> history;
    int prompt_length = 0;
    if (rng() % 2) {
      p.repetition_penalty = uniform(0.7f, 1.6f);
      p.presence_penalty = uniform(-1, 1);
      p.frequency_penalty = uniform(-1, 1);
      prompt_length = int(rng() % 60);
      const int output_length = int(rng() % 40);
      for (int j = 0; j < prompt_length + output_length; ++j) {
        // Mostly a few ids (repeats), some anywhere.
        history.push_back(rng() % 4 ? int(rng() % uint64_t(std::min(vocab, 24))) : int(rng() % uint64_t(vocab)));
      }
    }
    p.seed = rng();
    p.logprobs = int(rng() % uint64_t(std::min(max_logprobs, vocab) + 1));
    b.params.push_back(p);
    b.steps.push_back(rng() % 100000);
    b.prompt_lengths.push_back(prompt_length);
    b.ids.insert(b.ids.end(), history.begin(), history.end());
    b.offsets.push_back(int(b.ids.size()));
  }
  return b;
}

SamplingBatch make_repeated_batch(const std::vector<float>& logits, const cpu::SamplingParams& p, int64_t rows,
                                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  SamplingBatch b;
  b.vocab = int(logits.size());
  b.rows = rows;
  b.offsets.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    b.logits.insert(b.logits.end(), logits.begin(), logits.end());
    cpu::SamplingParams q = p;
    q.seed = rng();
    b.params.push_back(q);
    b.steps.push_back(uint64_t(r));
    b.prompt_lengths.push_back(0);
    b.offsets.push_back(0);
  }
  return b;
}

SamplingVerdict compare_sampling(const SamplingBatch& b, const SamplingOutput& got) {
  std::vector<cpu::SampleDecision> want(size_t(b.rows));
  cpu::parallel_for(b.rows, [&](int64_t r) {
    const int* h = b.ids.data() + b.offsets[size_t(r)];
    const size_t n = size_t(b.offsets[size_t(r) + 1] - b.offsets[size_t(r)]);
    const size_t prompt = std::min(n, size_t(b.prompt_lengths[size_t(r)]));
    want[size_t(r)] = cpu::sample_decision(b.logits.data() + r * b.vocab, b.vocab, b.params[size_t(r)],
                                           std::span<const int>(h, prompt),
                                           std::span<const int>(h + prompt, n - prompt), b.steps[size_t(r)]);
  });
  SamplingVerdict v;
  auto fail = [&](int64_t r, const std::string& what) {
    if (v.detail.empty()) v.detail = row_text(r, b.params[size_t(r)], b.steps[size_t(r)]) + ": " + what;
  };
  for (int64_t r = 0; r < b.rows; ++r) {
    const cpu::SampleDecision& w = want[size_t(r)];
    const int token = got.tokens[size_t(r)];
    if (token != w.sampled.token) {
      if (w.margin < kSamplingBoundaryMargin && token >= 0 && token < b.vocab) {
        ++v.near_boundary;
      } else {
        fail(r, "token " + std::to_string(token) + ", the reference's " + std::to_string(w.sampled.token) +
                    " (its closest decision is " + std::to_string(w.margin) + " from a boundary)");
        continue;
      }
    } else if (!got.token_logprobs.empty()) {
      const float lp = got.token_logprobs[size_t(r)];
      if (!std::isinf(lp) || !std::isinf(w.sampled.logprob)) {
        v.logprob_error = std::max(v.logprob_error, std::abs(double(lp) - double(w.sampled.logprob)));
      }
      if (!close(lp, w.sampled.logprob, kSamplingLogprobTolerance)) {
        fail(r, "logprob " + std::to_string(lp) + ", the reference's " + std::to_string(w.sampled.logprob));
      }
    }
    for (int j = 0; j < got.width; ++j) {
      const int id = got.top_ids[size_t(r * got.width + j)];
      const float lp = got.top_logprobs[size_t(r * got.width + j)];
      if (size_t(j) < w.sampled.top.size()) {
        const auto& [want_id, want_lp] = w.sampled.top[size_t(j)];
        if (id != want_id)
          fail(r, "top " + std::to_string(j) + " is id " + std::to_string(id) + ", the reference's " +
                      std::to_string(want_id));
        if (!close(lp, want_lp, kSamplingLogprobTolerance)) {
          fail(r, "top " + std::to_string(j) + " logprob " + std::to_string(lp) + ", the reference's " +
                      std::to_string(want_lp));
        }
      } else if (id != -1 || lp != kNegInf) {
        fail(r, "top " + std::to_string(j) + " past the row's " + std::to_string(w.sampled.top.size()) +
                    " is not (−1, −inf)");
      }
    }
  }
  return v;
}

std::vector<float> make_argmax_logits(int vocab, int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> logits(size_t(rows) * size_t(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * vocab;
    SplitMix64 mix{rng()};
    const int kind = int(r % 5);
    for (int i = 0; i < vocab; ++i) row[i] = mix.uniform(-20, 20);
    if (kind == 1) {  // the maximum twice: the lower id wins
      const int a = int(mix.next() % uint64_t(vocab)), c = int(mix.next() % uint64_t(vocab));
      row[a] = row[c] = 30;
    }
    if (kind == 2) {
      for (int j = 0; j < vocab / 3; ++j) row[mix.next() % uint64_t(vocab)] = std::nanf("");
    }
    if (kind == 3) std::fill(row, row + vocab, kNegInf);
    if (kind == 4) row[vocab - 1] = 25;  // the last element, past any vector body
  }
  return logits;
}

std::string compare_argmax(const std::vector<float>& logits, int vocab, const std::vector<int>& tokens) {
  for (size_t r = 0; r < tokens.size(); ++r) {
    const int want = cpu::argmax(logits.data() + r * size_t(vocab), vocab);
    if (tokens[r] != want) {
      return "row " + std::to_string(r) + ": token " + std::to_string(tokens[r]) + ", the reference's " +
             std::to_string(want);
    }
  }
  return {};
}

}  // namespace onecat
