#include "runtime/cpu/sampling.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "runtime/cpu/parallel.h"

namespace onecat::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The sampling order: larger value first, then lower id. Every filter keeps a prefix of it.
// A candidate carries its weight, so the filters never look it up by id.
struct Ranked {
  float value;
  int id;
  double w = 0;
};
bool before(const Ranked& a, const Ranked& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); }

std::string number(double v) {
  std::string s = std::to_string(v);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

// The last token (in sampling order) of the shortest prefix of `c` whose weight reaches
// `target`; *before_last and *through_last are the prefix's mass without and with it. Found
// without sorting c: one pass sums count and mass per bin of the value's upper 16 bits (the
// order key's bins are contiguous ranges of the order), the bins are walked from the top to
// the one where the mass reaches target, and only the tokens of that bin (and, should rounding
// of the bin sums leave target a hair short, the next) are sorted and walked one by one.
Ranked mass_prefix(const std::vector<Ranked>& c, double target, double* before_last, double* through_last) {
  constexpr int kBins = 1 << 16;
  auto bin = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending in v
    return int(u >> 16);
  };
  std::vector<double> mass(kBins, 0.0);
  std::vector<uint32_t> count(kBins, 0);
  for (const Ranked& r : c) {
    const int b = bin(r.value);
    mass[size_t(b)] += r.w;
    ++count[size_t(b)];
  }
  double acc = 0;
  size_t seen = 0;
  std::vector<Ranked> here;
  for (int b = kBins - 1; b >= 0; --b) {
    if (count[size_t(b)] == 0) continue;
    const bool last_bin = seen + count[size_t(b)] == c.size();
    if (acc + mass[size_t(b)] < target && !last_bin) {  // the whole bin is inside the prefix
      acc += mass[size_t(b)];
      seen += count[size_t(b)];
      continue;
    }
    here.clear();
    for (const Ranked& r : c) {
      if (bin(r.value) == b) here.push_back(r);
    }
    std::sort(here.begin(), here.end(), before);
    for (size_t k = 0; k < here.size(); ++k) {
      const double next = acc + here[k].w;
      if (next >= target || (last_bin && k + 1 == here.size())) {
        *before_last = acc;
        *through_last = next;
        return here[k];
      }
      acc = next;
    }
    seen += here.size();
  }
  throw Error("sampling: no candidate to keep");  // unreachable: c holds at least the maximum
}

}  // namespace

std::optional<std::string> invalid_reason(const SamplingParams& p) {
  if (!(std::isfinite(p.temperature) && p.temperature >= 0)) {
    return "temperature must be a finite number ≥ 0 (0 is greedy), got " + number(p.temperature);
  }
  if (p.top_k < -1) return "top_k must be ≥ 1, or 0 or −1 for all tokens, got " + std::to_string(p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return "top_p must be in (0, 1], got " + number(p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return "min_p must be in [0, 1], got " + number(p.min_p);
  if (!(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0)) {
    return "repetition_penalty must be a finite number > 0 (1 is off), got " + number(p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    return "presence_penalty must be in [−2, 2], got " + number(p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    return "frequency_penalty must be in [−2, 2], got " + number(p.frequency_penalty);
  }
  if (p.logprobs < 0 || p.logprobs > kMaxLogprobs) {
    return "logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(p.logprobs);
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0) return "logit_bias names token id " + std::to_string(id) + ", which is negative";
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return "logit_bias of token " + std::to_string(id) + " must be in [−100, 100], got " + number(bias);
    }
  }
  if (p.logit_bias.size() > 1) {
    std::vector<int32_t> ids;
    for (const auto& b : p.logit_bias) ids.push_back(b.first);
    std::sort(ids.begin(), ids.end());
    if (auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end()) {
      return "logit_bias names token " + std::to_string(*twice) + " twice";
    }
  }
  return std::nullopt;
}

void validate(const SamplingParams& p) {
  if (auto why = invalid_reason(p)) throw InputError("bad sampling parameters: " + *why + ".");
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  // The multipliers and Weyl key increments of Philox-4x32 (Salmon et al., Random123).
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

float philox_uniform(uint64_t seed, uint64_t step) {
  auto x = philox4x32_10({uint32_t(step), uint32_t(step >> 32), 0, 0}, {uint32_t(seed), uint32_t(seed >> 32)});
  return float((x[0] >> 8) + 1) * 0x1p-24f;
}

float sanitize_logit(float v) {
  if (std::isnan(v)) return -std::numeric_limits<float>::infinity();
  if (v == std::numeric_limits<float>::infinity()) return FLT_MAX;
  return v + 0.0f;  // −0 + +0 = +0: equal values get one key on the GPU
}

std::vector<float> penalized_logits(const float* logits, int64_t vocab, const SamplingParams& p,
                                    std::span<const int> prompt_tokens, std::span<const int> output_tokens) {
  std::vector<float> l(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) l[size_t(i)] = sanitize_logit(logits[i]);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab) {
      throw InputError("logit_bias token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(vocab) + ").");
    }
    l[size_t(id)] = l[size_t(id)] + bias + 0.0f;
  }
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !additive) return l;
  // Per token: bit 0 = seen in the prompt, the rest = times seen in the output.
  std::vector<uint32_t> seen(static_cast<size_t>(vocab), 0);
  auto check = [&](int id) {
    if (id < 0 || id >= vocab) {
      throw InputError("history token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(vocab) + ").");
    }
  };
  for (int id : prompt_tokens) check(id), seen[size_t(id)] |= 1u;
  for (int id : output_tokens) check(id), seen[size_t(id)] += 2u;
  for (int64_t i = 0; i < vocab; ++i) {
    const uint32_t s = seen[size_t(i)];
    if (s == 0) continue;
    float v = l[size_t(i)];
    // One fp32 operation per statement, in this order, as templates/sampling does them
    // (no contraction into FMAs), so both sides get the same bits.
    if (repetition) v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
    const uint32_t count = s >> 1;
    if (count > 0) {
      const float frequency = p.frequency_penalty * float(count);
      v = v - frequency;
      v = v - p.presence_penalty;
    }
    l[size_t(i)] = v + 0.0f;
  }
  return l;
}

bool mask_logits(std::span<float> logits, const uint32_t* allowed) {
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    if ((allowed[i >> 5] >> (i & 31)) & 1u) {
      any = true;
    } else {
      logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  return any;
}

int argmax(const float* logits, int64_t vocab) {
  int best = 0;
  float best_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) {
    if (logits[i] > best_value) best_value = logits[i], best = int(i);
  }
  return best;
}

namespace {

// The row's long passes (exp over every logit) go in fixed chunks, summed in chunk order, so a
// row gives the same bits whether its chunks run on one core or (split) on every core.
constexpr int64_t kRowChunk = 8192;

template <class Fn>
void over_chunks(int64_t n, bool split, Fn&& fn) {
  if (split && n > kRowChunk) {
    parallel_chunks(n, kRowChunk, fn);
  } else {
    for (int64_t b = 0; b < n; b += kRowChunk) fn(b, std::min(n, b + kRowChunk));
  }
}

// The tokens a sampled row keeps (temperature, min_p, top_k, top_p over the penalised row l whose
// maximum is l_max), with their weights; *margin lowered to the closest filter decision.
std::vector<Ranked> keep(const float* l, float l_max, int64_t vocab, const SamplingParams& p, bool split,
                         double* margin) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Weights and the min_p cut, chunk by chunk (kept in id order).
  const double t = p.temperature;
  const int64_t chunks = (vocab + kRowChunk - 1) / kRowChunk;
  std::vector<std::vector<Ranked>> parts(static_cast<size_t>(chunks));
  std::vector<double> margins(static_cast<size_t>(chunks), kInf);
  over_chunks(vocab, split, [&](int64_t b, int64_t e) {
    std::vector<Ranked>& part = parts[size_t(b / kRowChunk)];
    double& margin = margins[size_t(b / kRowChunk)];
    part.reserve(size_t(e - b));
    for (int64_t i = b; i < e; ++i) {
      const float v = l[i];
      if (v == kNegInf) continue;
      const double wi = std::exp((double(v) - double(l_max)) / t);
      if (p.min_p > 0) {
        margin = std::min(margin, std::abs(wi - p.min_p) / p.min_p);
        if (wi < p.min_p) continue;
      }
      part.push_back({v, int(i), wi});
    }
  });
  std::vector<Ranked> kept;
  size_t kept_size = 0;
  for (const auto& part : parts) kept_size += part.size();
  kept.reserve(kept_size);
  for (size_t c = 0; c < parts.size(); ++c) {
    kept.insert(kept.end(), parts[c].begin(), parts[c].end());
    *margin = std::min(*margin, margins[c]);
  }
  // Each filter keeps a prefix of the order; top_p's is found without reordering `kept`, and
  // the tokens up to its last are taken in kept's order (id order, unless top_k went first).
  auto through = [&kept](const Ranked& last) {
    kept.erase(std::remove_if(kept.begin(), kept.end(), [&last](const Ranked& r) { return before(last, r); }),
               kept.end());
  };
  // top_k: exact on the fp32 values, so no margin.
  if (p.top_k > 0 && size_t(p.top_k) < kept.size()) {
    std::nth_element(kept.begin(), kept.begin() + p.top_k, kept.end(), before);
    kept.resize(size_t(p.top_k));  // out of id order: sorted again after the filters (k tokens)
  }
  if (p.top_p < 1) {
    double mass = 0;
    for (const Ranked& r : kept) mass += r.w;
    const double target = double(p.top_p) * mass;
    double before_last = 0, through_last = 0;
    through(mass_prefix(kept, target, &before_last, &through_last));
    *margin = std::min(*margin, std::min(target - before_last, through_last - target) / mass);
  }
  return kept;
}

SampleDecision decide(const float* logits, int64_t vocab, const SamplingParams& p, std::span<const int> prompt_tokens,
                      std::span<const int> output_tokens, uint64_t step, bool token_logprob, bool split = false,
                      int given = -1, const uint32_t* allowed = nullptr) {
  validate(p);
  if (vocab < 1 || vocab > std::numeric_limits<int>::max()) {
    throw InputError("sampling needs a vocabulary of 1 to 2^31−1 tokens, got " + std::to_string(vocab) + ".");
  }
  if (p.logprobs > vocab) {
    throw InputError("logprobs=" + std::to_string(p.logprobs) + " exceeds the vocabulary of " + std::to_string(vocab) +
                     ".");
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  SampleDecision d;
  d.margin = kInf;

  // Greedy with nothing asked but the token, under a mask or not (a constrained request's usual
  // row): the (masked) argmax in one pass, the same token as the general path below (sanitised
  // values, the lowest id among equal maxima; under a mask the first allowed token when every
  // allowed one is −inf) without its copies of the row.
  if (given < 0 && !token_logprob && p.logprobs == 0 && p.temperature < kGreedyTemperature &&
      p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
      p.logit_bias.empty()) {
    if (!allowed) {
      int64_t best = 0;
      float best_value = kNegInf;
      for (int64_t i = 0; i < vocab; ++i) {
        const float v = sanitize_logit(logits[i]);
        if (v > best_value) best_value = v, best = i;
      }
      d.sampled.token = int(best);
      return d;
    }
    int64_t best = -1, first = -1;
    float best_value = kNegInf;
    for (int64_t w = 0; w < (vocab + 31) / 32; ++w) {
      for (uint32_t bits = allowed[w]; bits != 0; bits &= bits - 1) {
        const int64_t i = w * 32 + std::countr_zero(bits);
        if (i >= vocab) break;
        if (first < 0) first = i;
        const float v = sanitize_logit(logits[i]);
        if (v > best_value) best_value = v, best = i;
      }
    }
    if (first < 0) throw Error("sampling: the row's mask allows no token");
    d.sampled.token = int(best >= 0 ? best : first);
    return d;
  }

  // Logprobs of the raw distribution (the log-sum-exp only when a logprob is asked for).
  std::vector<float> raw(static_cast<size_t>(vocab));
  float raw_max_f = kNegInf;
  for (int64_t i = 0; i < vocab; ++i) {
    const float v = sanitize_logit(logits[i]);
    raw[size_t(i)] = v;
    raw_max_f = std::max(raw_max_f, v);
  }
  const double raw_max = raw_max_f;
  const int64_t chunks = (vocab + kRowChunk - 1) / kRowChunk;
  double lse = -kInf;
  if ((token_logprob || p.logprobs > 0) && raw_max > -kInf) {
    std::vector<double> sums(static_cast<size_t>(chunks), 0.0);
    over_chunks(vocab, split, [&](int64_t b, int64_t e) {
      double sum = 0;
      for (int64_t i = b; i < e; ++i) sum += std::exp(double(raw[size_t(i)]) - raw_max);
      sums[size_t(b / kRowChunk)] = sum;
    });
    double sum = 0;
    for (double s : sums) sum += s;
    lse = raw_max + std::log(sum);
  }
  auto logprob = [&](int id) {
    return lse == -kInf ? -std::numeric_limits<float>::infinity() : float(raw[size_t(id)] - lse);
  };
  if (p.logprobs > 0) {
    std::vector<Ranked> all(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) all[size_t(i)] = {raw[size_t(i)], int(i)};
    std::partial_sort(all.begin(), all.begin() + p.logprobs, all.end(), before);
    for (int j = 0; j < p.logprobs; ++j) d.sampled.top.emplace_back(all[size_t(j)].id, logprob(all[size_t(j)].id));
  }

  if (given >= 0) {  // token_logprobs(): the logprobs of a token not drawn
    d.sampled.token = given;
    d.sampled.logprob = logprob(given);
    return d;
  }

  const bool penalised = p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
                         !p.logit_bias.empty() || allowed;
  std::vector<float> penalised_values;
  if (penalised) penalised_values = penalized_logits(logits, vocab, p, prompt_tokens, output_tokens);
  if (allowed && !mask_logits(penalised_values, allowed)) throw Error("sampling: the row's mask allows no token");
  const float* l = penalised ? penalised_values.data() : raw.data();
  float l_max = raw_max_f;
  if (penalised) {
    l_max = kNegInf;
    for (int64_t i = 0; i < vocab; ++i) l_max = std::max(l_max, l[i]);
  }
  auto finish = [&](int token) {
    d.sampled.token = token;
    d.sampled.logprob = token_logprob || p.logprobs > 0 ? logprob(token) : 0.0f;
    return d;
  };
  if (l_max == kNegInf && allowed) {  // every allowed logit −inf (or NaN): the first allowed
    int64_t first = 0;
    while (!((allowed[first >> 5] >> (first & 31)) & 1u)) ++first;
    return finish(int(first));
  }
  if (p.temperature < kGreedyTemperature || l_max == kNegInf) return finish(argmax(l, vocab));

  std::vector<Ranked> kept = keep(l, l_max, vocab, p, split, &d.margin);
  d.kept = int64_t(kept.size());

  // Inverse CDF over the kept tokens in id order (already so when no filter reordered them).
  auto by_id = [](const Ranked& a, const Ranked& b) { return a.id < b.id; };
  if (!std::is_sorted(kept.begin(), kept.end(), by_id)) std::sort(kept.begin(), kept.end(), by_id);
  double total = 0;
  for (const Ranked& r : kept) total += r.w;
  const double target = double(philox_uniform(p.seed, step)) * total;
  double cum = 0;
  int token = kept.back().id;
  for (const Ranked& r : kept) {
    const double next = cum + r.w;
    if (next >= target) {
      token = r.id;
      d.margin = std::min(d.margin, std::min(target - cum, next - target) / total);
      break;
    }
    cum = next;
  }
  return finish(token);
}

}  // namespace

SampleDecision sample_decision(const float* logits, int64_t vocab, const SamplingParams& p,
                               std::span<const int> prompt_tokens, std::span<const int> output_tokens, uint64_t step) {
  return decide(logits, vocab, p, prompt_tokens, output_tokens, step, true);
}

sampling::RowParams row_params(const SamplingParams& p, uint64_t step, int prompt_length) {
  if (!p.logit_bias.empty())
    throw InputError("the GPU sampling kernel does not apply logit_bias (the host sampler does).");
  sampling::RowParams r;
  r.temperature = p.temperature;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.top_k = p.top_k;
  r.logprobs = p.logprobs;
  r.seed = p.seed;
  r.step = step;
  r.prompt_length = prompt_length;
  return r;
}

SampledToken sample(const float* logits, int64_t vocab, const SamplingParams& p, std::span<const int> prompt_tokens,
                    std::span<const int> output_tokens, uint64_t step, bool token_logprob) {
  return decide(logits, vocab, p, prompt_tokens, output_tokens, step, token_logprob).sampled;
}

std::vector<std::pair<int, double>> sampling_distribution(const float* logits, int64_t vocab, const SamplingParams& p,
                                                          std::span<const int> prompt_tokens,
                                                          std::span<const int> output_tokens) {
  validate(p);
  if (vocab < 1 || vocab > std::numeric_limits<int>::max()) {
    throw InputError("sampling needs a vocabulary of 1 to 2^31−1 tokens, got " + std::to_string(vocab) + ".");
  }
  // penalized_logits sanitises, and leaves the row as it is without penalties.
  const std::vector<float> l = penalized_logits(logits, vocab, p, prompt_tokens, output_tokens);
  float l_max = -std::numeric_limits<float>::infinity();
  for (float v : l) l_max = std::max(l_max, v);
  if (p.temperature < kGreedyTemperature || l_max == -std::numeric_limits<float>::infinity()) {
    return {{argmax(l.data(), vocab), 1.0}};
  }
  double margin = kInf;
  std::vector<Ranked> kept = keep(l.data(), l_max, vocab, p, false, &margin);
  std::sort(kept.begin(), kept.end(), [](const Ranked& a, const Ranked& b) { return a.id < b.id; });
  double total = 0;
  for (const Ranked& r : kept) total += r.w;
  std::vector<std::pair<int, double>> out;
  out.reserve(kept.size());
  for (const Ranked& r : kept) out.emplace_back(r.id, r.w / total);
  return out;
}

std::vector<SampledToken> sample_rows(std::span<const SampleRow> rows, int64_t vocab) {
  std::vector<SampledToken> out(rows.size());
  auto one = [&](size_t r, bool split) {
    const SampleRow& x = rows[r];
    out[r] = decide(x.logits, vocab, *x.params, x.prompt_tokens, x.output_tokens, x.step, x.token_logprob, split, -1,
                    x.allowed)
                 .sampled;
  };
  if (rows.size() == 1) {
    one(0, true);
  } else {
    parallel_for(int64_t(rows.size()), [&](int64_t r) { one(size_t(r), false); });
  }
  return out;
}

SampledToken token_logprobs(const float* logits, int64_t vocab, int token, int n) {
  if (token < 0 || token >= vocab) {
    throw InputError("token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(vocab) +
                     ").");
  }
  if (n < 0 || n > std::min<int64_t>(kMaxLogprobs, vocab)) {
    throw InputError("logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(n) + ".");
  }
  SamplingParams p;
  p.logprobs = n;
  return decide(logits, vocab, p, {}, {}, 0, true, false, token).sampled;
}

}  // namespace onecat::cpu
