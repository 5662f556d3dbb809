// The sampling family's CPU reference (runtime/cpu/sampling): Philox against Random123's
// published answers, the parameter checks, the semantics case by case, an independent
// sort-based fp64 implementation on random rows (ties, −inf, NaN, extreme temperatures, each
// filter alone and combined, penalties with repeated ids), and the sampled frequencies of a
// small vocabulary against the distribution the definition gives (chi-square); and the
// family's spec, config, space, typed op and NVRTC builds for sm_70 and sm_90 without spills.
#include "runtime/cpu/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "base/error.h"
#include "codegen/family.h"
#include "codegen/sampling/emit.h"
#include "codegen/sampling/op.h"
#include "codegen/sampling/space.h"
#include "runtime/jit/compiler.h"
#include "tests/compile_checks.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using cpu::SamplingParams;
using test::expect_throw;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(SamplingPhilox, MatchesRandom123KnownAnswers) {
  // Random123 1.14 examples/kat_vectors, "philox4x32 10": counter, key → output.
  struct Case {
    std::array<uint32_t, 4> counter;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> out;
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) EXPECT_EQ(cpu::philox4x32_10(c.counter, c.key), c.out);
}

TEST(SamplingPhilox, UniformIsInZeroOneAndUniform) {
  // 2^16 draws over 16 bins: chi-square with 15 degrees of freedom, 37.7 is its 0.001 quantile.
  constexpr int kDraws = 1 << 16, kBins = 16;
  std::vector<int> bins(kBins);
  for (uint64_t step = 0; step < kDraws; ++step) {
    const float u = cpu::philox_uniform(0x5eed + step / 4096, step);
    ASSERT_GT(u, 0.0f);
    ASSERT_LE(u, 1.0f);
    ++bins[std::min(kBins - 1, int(u * kBins))];
  }
  double chi2 = 0;
  for (int b : bins) chi2 += std::pow(b - kDraws / double(kBins), 2) / (kDraws / double(kBins));
  EXPECT_LT(chi2, 37.7);
  // The seed's high half and the step's high half both reach the key and counter.
  EXPECT_NE(cpu::philox_uniform(1, 5), cpu::philox_uniform(1 + (uint64_t(1) << 32), 5));
  EXPECT_NE(cpu::philox_uniform(1, 5), cpu::philox_uniform(1, 5 + (uint64_t(1) << 32)));
}

TEST(SamplingParamsCheck, BadSettingsAreOneSentence) {
  const std::vector<std::pair<std::function<void(SamplingParams&)>, std::string>> cases = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature must be a finite number ≥ 0"},
      {[](SamplingParams& p) { p.temperature = std::numeric_limits<float>::infinity(); }, "temperature"},
      {[](SamplingParams& p) { p.temperature = std::nanf(""); }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k must be ≥ 1, or 0 or −1"},
      {[](SamplingParams& p) { p.top_p = 0; }, "top_p must be in (0, 1], got 0"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.min_p = 1.1f; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty must be a finite number > 0"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty must be in [−2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty must be in [−2, 2]"},
      {[](SamplingParams& p) { p.logprobs = 21; }, "logprobs must be in [0, 20], got 21"},
      {[](SamplingParams& p) { p.logprobs = -1; }, "logprobs must be in [0, 20]"},
      {[](SamplingParams& p) { p.logit_bias.emplace_back(1, 100.5f); }, "token 1 must be in [−100, 100]"},
      {[](SamplingParams& p) { p.logit_bias.emplace_back(1, std::nanf("")); }, "logit_bias of token 1"},
      {[](SamplingParams& p) { p.logit_bias.emplace_back(-1, 1.f); }, "token id -1, which is negative"},
      {[](SamplingParams& p) { p.logit_bias.assign(3, std::pair(2, 1.f)); }, "names token 2 twice"},
  };
  for (const auto& [spoil, needle] : cases) {
    SamplingParams p;
    spoil(p);
    SCOPED_TRACE(needle);
    ASSERT_TRUE(cpu::invalid_reason(p).has_value());
    expect_throw<InputError>([&] { cpu::validate(p); }, {"bad sampling parameters: ", needle});
    const float logits[4] = {0, 1, 2, 3};
    expect_throw<InputError>([&] { cpu::sample(logits, 4, p, {}, {}, 0); }, {needle});
  }
  SamplingParams fine{.temperature = 0, .top_k = -1, .top_p = 1, .min_p = 1, .repetition_penalty = 2, .logprobs = 20};
  EXPECT_FALSE(cpu::invalid_reason(fine).has_value());
  EXPECT_NO_THROW(cpu::validate(fine));
}

TEST(SamplingReference, BadHistoryAndVocabularyAreRejected) {
  const float logits[3] = {0, 1, 2};
  SamplingParams p{.repetition_penalty = 1.5f};
  const int bad[] = {1, 3};
  expect_throw<InputError>([&] { cpu::sample(logits, 3, p, bad, {}, 0); }, {"history token id 3", "[0, 3)"});
  expect_throw<InputError>([&] { cpu::sample(logits, 3, p, {}, std::span<const int>(bad, 2), 0); }, {"token id 3"});
  p.logprobs = 4;
  expect_throw<InputError>([&] { cpu::sample(logits, 3, p, {}, {}, 0); }, {"logprobs=4 exceeds the vocabulary of 3"});
}

// logit_bias is added to the raw logits before the penalties: a sample of the biased settings is
// the sample of the pre-biased row (any temperature), the logprobs stay the raw row's, +100
// forces a token under greedy decoding and −100 bans it; ids are checked against the vocabulary.
TEST(SamplingReference, LogitBiasIsAddedBeforeEverythingButTheLogprobs) {
  const float logits[5] = {0.5f, 3.0f, -1.0f, 2.5f, 0.0f};
  SamplingParams greedy{.temperature = 0, .logprobs = 2};
  greedy.logit_bias = {{2, 100}};
  EXPECT_EQ(cpu::sample(logits, 5, greedy, {}, {}, 0).token, 2);
  greedy.logit_bias = {{1, -100}};
  const cpu::SampledToken banned = cpu::sample(logits, 5, greedy, {}, {}, 0);
  EXPECT_EQ(banned.token, 3);
  SamplingParams raw{.temperature = 0, .logprobs = 2};
  const cpu::SampledToken plain = cpu::sample(logits, 5, raw, {}, {}, 0);
  EXPECT_EQ(plain.token, 1);
  EXPECT_EQ(banned.top, plain.top) << "logprobs of the raw distribution";
  EXPECT_EQ(banned.logprob, cpu::token_logprobs(logits, 5, 3, 2).logprob);
  // Sampled: the biased settings draw what the pre-biased row draws, step after step.
  SamplingParams hot{.temperature = 0.9f, .top_p = 0.9f, .repetition_penalty = 1.3f, .seed = 77};
  hot.logit_bias = {{0, 1.5f}, {4, -0.75f}};
  float shifted[5];
  std::copy(logits, logits + 5, shifted);
  shifted[0] = shifted[0] + 1.5f, shifted[4] = shifted[4] - 0.75f;
  SamplingParams unbiased = hot;
  unbiased.logit_bias.clear();
  const int history[] = {0, 3};
  for (uint64_t step = 0; step < 200; ++step) {
    ASSERT_EQ(cpu::sample(logits, 5, hot, history, {}, step).token,
              cpu::sample(shifted, 5, unbiased, history, {}, step).token)
        << "step " << step;
  }
  hot.logit_bias = {{5, 1.0f}};
  expect_throw<InputError>([&] { cpu::sample(logits, 5, hot, {}, {}, 0); }, {"logit_bias token id 5", "[0, 5)"});
  expect_throw<InputError>([&] { cpu::row_params(hot, 0, 0); }, {"logit_bias"});
  EXPECT_FALSE(cpu::plain_greedy(greedy));
}

// token_logprobs: what sample reports for its token, for any token given.
TEST(SamplingReference, TokenLogprobsAreWhatSampleReports) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 3);
  std::vector<float> row(1000);
  for (float& v : row) v = normal(rng);
  row[17] = std::nanf("");
  const SamplingParams p{.temperature = 0.8f, .seed = 3, .logprobs = 5};
  for (uint64_t step = 0; step < 20; ++step) {
    const cpu::SampledToken drawn = cpu::sample(row.data(), 1000, p, {}, {}, step);
    const cpu::SampledToken given = cpu::token_logprobs(row.data(), 1000, drawn.token, 5);
    EXPECT_EQ(given.token, drawn.token);
    EXPECT_EQ(given.logprob, drawn.logprob);
    EXPECT_EQ(given.top, drawn.top);
  }
  EXPECT_EQ(cpu::token_logprobs(row.data(), 1000, 17, 0).logprob, -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(cpu::token_logprobs(row.data(), 1000, 3, 0).top.empty());
  expect_throw<InputError>([&] { cpu::token_logprobs(row.data(), 1000, 1000, 1); }, {"token id 1000"});
  expect_throw<InputError>([&] { cpu::token_logprobs(row.data(), 1000, 0, 21); }, {"logprobs"});
}

TEST(SamplingReference, ArgmaxTakesTheLowestIdAmongEqualMaxima) {
  const float a[] = {1, 3, 2, 3, 3};
  EXPECT_EQ(cpu::argmax(a, 5), 1);
  const float nan = std::nanf("");
  const float b[] = {nan, kNegInf, nan};
  EXPECT_EQ(cpu::argmax(b, 3), 0);
  const float c[] = {nan, -5, nan, -4};
  EXPECT_EQ(cpu::argmax(c, 4), 3);
}

TEST(SamplingReference, PenaltiesFollowVllmAndOpenAi) {
  //                 0     1   2    3    4   5
  const float raw[] = {2.0f, -2.0f, 0.5f, 1.0f, 0, -1};
  const int prompt[] = {0, 1};
  const int output[] = {2, 3, 3, 3, 1};
  SamplingParams p{.repetition_penalty = 2, .presence_penalty = 0.25f, .frequency_penalty = 0.5f};
  auto l = cpu::penalized_logits(raw, 6, p, prompt, output);
  EXPECT_EQ(l[0], 1.0f);                  // prompt only: divided
  EXPECT_EQ(l[1], -4.0f - 0.5f - 0.25f);  // negative: multiplied; once in the output
  EXPECT_EQ(l[2], 0.25f - 0.5f - 0.25f);  // output once
  EXPECT_EQ(l[3], 0.5f - 1.5f - 0.25f);   // output three times: frequency counts each
  EXPECT_EQ(l[4], 0.0f);                  // never seen
  EXPECT_EQ(l[5], -1.0f);
  // Penalties never touch the logprobs: they are the raw distribution's.
  p.temperature = 0;
  p.logprobs = 2;
  auto s = cpu::sample(raw, 6, p, prompt, output, 0);
  EXPECT_EQ(s.token, 0);
  double lse = 0;
  for (float v : raw) lse += std::exp(double(v));
  lse = std::log(lse);
  EXPECT_NEAR(s.logprob, 2.0 - lse, 1e-6);
  ASSERT_EQ(s.top.size(), 2u);
  EXPECT_EQ(s.top[0].first, 0);
  EXPECT_EQ(s.top[1].first, 3);
  EXPECT_NEAR(s.top[1].second, 1.0 - lse, 1e-6);
}

TEST(SamplingReference, GreedyAndTopKOneTakeTheLowestIdOfTheMaxima) {
  const float raw[] = {1, 4, 2, 4, -3};
  SamplingParams greedy{.temperature = 0};
  SamplingParams top1{.temperature = 1, .top_k = 1};
  SamplingParams tiny{.temperature = 1e-6f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    greedy.seed = top1.seed = tiny.seed = seed;
    EXPECT_EQ(cpu::sample(raw, 5, greedy, {}, {}, seed).token, 1);
    EXPECT_EQ(cpu::sample(raw, 5, top1, {}, {}, seed).token, 1);
    EXPECT_EQ(cpu::sample(raw, 5, tiny, {}, {}, seed).token, 1);
  }
  // top_k=2 over {4, 4, 2}: the two 4s (ids 1 and 3), never id 2.
  SamplingParams top2{.temperature = 5, .top_k = 2};
  std::set<int> seen;
  for (uint64_t step = 0; step < 200; ++step) seen.insert(cpu::sample(raw, 5, top2, {}, {}, step).token);
  EXPECT_EQ(seen, (std::set<int>{1, 3}));
  // Ties at the k-th value: the lower ids are kept (exactly k tokens).
  const float tied[] = {3, 1, 1, 1, 1};
  SamplingParams tie2{.temperature = 100, .top_k = 3};
  seen.clear();
  for (uint64_t step = 0; step < 400; ++step) {
    auto d = cpu::sample_decision(tied, 5, tie2, {}, {}, step);
    EXPECT_EQ(d.kept, 3);
    seen.insert(d.sampled.token);
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));
}

TEST(SamplingReference, MinPAndTopPKeepThePrefixTheDefinitionSays) {
  // Probabilities at temperature 1 ∝ {8, 4, 2, 1, 1} (log weights).
  const float raw[] = {std::log(8.0f), std::log(4.0f), std::log(2.0f), 0, 0};
  auto kept = [&](SamplingParams p) {
    std::set<int> s;
    for (uint64_t step = 0; step < 400; ++step) s.insert(cpu::sample(raw, 5, p, {}, {}, step).token);
    return s;
  };
  EXPECT_EQ(kept({.min_p = 0.4f}), (std::set<int>{0, 1}));              // w ≥ 0.4: 1, 0.5
  EXPECT_EQ(kept({.min_p = 0.2f}), (std::set<int>{0, 1, 2}));           // 0.25 ≥ 0.2
  EXPECT_EQ(kept({.top_p = 0.5f}), (std::set<int>{0}));                 // 8/16 reaches 0.5
  EXPECT_EQ(kept({.top_p = 0.51f}), (std::set<int>{0, 1}));             // 12/16
  EXPECT_EQ(kept({.top_p = 0.9f}), (std::set<int>{0, 1, 2, 3}));        // 15/16; ties by lower id
  EXPECT_EQ(kept({.top_k = 3, .top_p = 0.7f}), (std::set<int>{0, 1}));  // 12/14 of the top 3
  EXPECT_EQ(kept({.top_p = 1}), (std::set<int>{0, 1, 2, 3, 4}));
  // A huge temperature makes the kept set uniform, never widening it past the filters.
  EXPECT_EQ(kept({.temperature = 1e30f, .top_k = 4}), (std::set<int>{0, 1, 2, 3}));
}

TEST(SamplingReference, SameSeedSameTokenAndStepsDiffer) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> row(1001);
  for (float& v : row) v = normal(rng);
  SamplingParams p{.temperature = 1.3f, .top_p = 0.95f, .seed = 1234};
  std::set<int> tokens;
  for (uint64_t step = 0; step < 20; ++step) {
    const int t = cpu::sample(row.data(), 1001, p, {}, {}, step).token;
    EXPECT_EQ(cpu::sample(row.data(), 1001, p, {}, {}, step).token, t);
    tokens.insert(t);
  }
  EXPECT_GT(tokens.size(), 5u);
}

// ---- An independent implementation: sort everything, fp64, definitions as written. ----

struct Oracle {
  int token;
  float logprob;
  std::vector<std::pair<int, float>> top;
  double margin;  // distance of the closest decision from its boundary, relative
};

Oracle oracle(const std::vector<float>& logits, const SamplingParams& p, const std::vector<int>& prompt,
              const std::vector<int>& output, uint64_t step) {
  const int vocab = int(logits.size());
  std::vector<float> raw(logits);
  for (float& v : raw) {
    if (std::isnan(v)) v = kNegInf;
    if (std::isinf(v) && v > 0) v = std::numeric_limits<float>::max();
    if (v == 0) v = 0;  // −0 → +0
  }
  auto rank = [](const std::vector<float>& v) {
    std::vector<int> ids(v.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return v[size_t(a)] > v[size_t(b)]; });
    return ids;  // stable: equal values keep id order
  };
  Oracle o{};
  o.margin = std::numeric_limits<double>::infinity();
  const std::vector<int> raw_order = rank(raw);
  const double m = raw[size_t(raw_order[0])];
  double lse = -std::numeric_limits<double>::infinity();
  if (m > -std::numeric_limits<double>::infinity()) {
    double s = 0;
    for (float v : raw) s += std::exp(double(v) - m);
    lse = m + std::log(s);
  }
  auto lp = [&](int id) { return std::isinf(lse) ? kNegInf : float(double(raw[size_t(id)]) - lse); };
  for (int j = 0; j < p.logprobs; ++j) o.top.emplace_back(raw_order[size_t(j)], lp(raw_order[size_t(j)]));

  std::map<int, int> in_prompt, in_output;
  for (int id : prompt) in_prompt[id] = 1;
  for (int id : output) ++in_output[id];
  std::vector<float> l(raw);
  for (int i = 0; i < vocab; ++i) {
    const bool seen = in_prompt.count(i) || in_output.count(i);
    if (!seen) continue;
    float v = l[size_t(i)];
    if (p.repetition_penalty != 1) v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
    if (auto it = in_output.find(i); it != in_output.end()) {
      const float f = p.frequency_penalty * float(it->second);
      v = v - f;
      v = v - p.presence_penalty;
    }
    l[size_t(i)] = v == 0 ? 0.0f : v;
  }
  const std::vector<int> order = rank(l);
  if (p.temperature < cpu::kGreedyTemperature || l[size_t(order[0])] == kNegInf) {
    o.token = order[0];
    o.logprob = lp(o.token);
    return o;
  }
  const double top = l[size_t(order[0])];
  std::vector<double> w;
  for (int id : order) {
    if (l[size_t(id)] == kNegInf) break;
    w.push_back(std::exp((double(l[size_t(id)]) - top) / double(p.temperature)));
  }
  size_t n = w.size();
  if (p.min_p > 0) {
    size_t keep = 0;
    while (keep < n && w[keep] >= p.min_p) ++keep;
    for (double x : w) o.margin = std::min(o.margin, std::abs(x - p.min_p) / p.min_p);
    n = keep;
  }
  if (p.top_k > 0) n = std::min(n, size_t(p.top_k));
  if (p.top_p < 1) {
    double mass = 0;
    for (size_t j = 0; j < n; ++j) mass += w[j];
    const double target = p.top_p * mass;
    double cum = 0;
    for (size_t j = 0; j < n; ++j) {
      if (cum + w[j] >= target) {
        o.margin = std::min(o.margin, std::min(target - cum, cum + w[j] - target) / mass);
        n = j + 1;
        break;
      }
      cum += w[j];
    }
  }
  std::vector<std::pair<int, double>> kept;
  for (size_t j = 0; j < n; ++j) kept.emplace_back(order[j], w[j]);
  std::sort(kept.begin(), kept.end());
  double total = 0;
  for (auto& k : kept) total += k.second;
  const double target = double(cpu::philox_uniform(p.seed, step)) * total;
  double cum = 0;
  o.token = kept.back().first;
  for (auto& [id, weight] : kept) {
    if (cum + weight >= target) {
      o.token = id;
      o.margin = std::min(o.margin, std::min(target - cum, cum + weight - target) / total);
      break;
    }
    cum += weight;
  }
  o.logprob = lp(o.token);
  return o;
}

TEST(SamplingReference, MatchesASortBasedImplementationOnRandomRows) {
  std::mt19937_64 rng(2024);
  const int vocabs[] = {1, 2, 7, 33, 1000, 4099, 50021};
  const float temperatures[] = {0, 1e-6f, 0.05f, 0.7f, 1, 3, 1e4f, 1e30f};
  int rows = 0, near_boundary = 0;
  std::set<int64_t> kept_sizes;
  for (int vocab : vocabs) {
    for (int trial = 0; trial < 60; ++trial) {
      // Logits: normal at a random scale, some rows quantised to create ties, some −inf / NaN.
      std::normal_distribution<float> normal(0, std::uniform_real_distribution<float>(0.1f, 8)(rng));
      std::vector<float> logits(static_cast<size_t>(vocab));
      const bool ties = trial % 3 == 0;
      for (float& v : logits) {
        v = normal(rng);
        if (ties) v = std::round(v * 2) / 2;
      }
      if (trial % 4 == 1) {
        for (int j = 0; j < vocab / 3; ++j) logits[rng() % size_t(vocab)] = kNegInf;
      }
      if (trial % 10 == 7) logits[rng() % size_t(vocab)] = std::nanf("");
      if (trial == 11) std::fill(logits.begin(), logits.end(), kNegInf);

      SamplingParams p;
      p.temperature = temperatures[trial % std::size(temperatures)];
      const int filters = trial % 8;  // bit 0: top_k, bit 1: top_p, bit 2: min_p
      if (filters & 1) p.top_k = int(rng() % size_t(std::min(vocab, 64)) + 1);
      if (trial % 16 == 15) p.top_k = -1;
      if (filters & 2) p.top_p = std::uniform_real_distribution<float>(0.05f, 1)(rng);
      if (filters & 4) p.min_p = std::uniform_real_distribution<float>(0.001f, 0.5f)(rng);
      std::vector<int> prompt, output;
      if (trial % 5 >= 2) {
        p.repetition_penalty = std::uniform_real_distribution<float>(0.5f, 2)(rng);
        p.presence_penalty = std::uniform_real_distribution<float>(-2, 2)(rng);
        p.frequency_penalty = std::uniform_real_distribution<float>(-2, 2)(rng);
        const int history = int(rng() % 40);
        for (int j = 0; j < history; ++j) {
          // Few distinct ids, so ids repeat.
          const int id = int(rng() % size_t(std::min(vocab, 12)));
          (j % 2 ? output : prompt).push_back(id);
        }
      }
      p.seed = rng();
      p.logprobs = int(rng() % size_t(std::min(vocab, cpu::kMaxLogprobs) + 1));
      const uint64_t step = rng() % 1000;

      SCOPED_TRACE("vocab " + std::to_string(vocab) + " trial " + std::to_string(trial));
      const Oracle want = oracle(logits, p, prompt, output, step);
      const cpu::SampleDecision got = cpu::sample_decision(logits.data(), vocab, p, prompt, output, step);
      // Without the token's logprob (the engine's call when none is asked for): the same choice.
      const cpu::SampledToken lean = cpu::sample(logits.data(), vocab, p, prompt, output, step, false);
      EXPECT_EQ(lean.token, got.sampled.token);
      EXPECT_EQ(lean.logprob, p.logprobs > 0 ? got.sampled.logprob : 0.0f);
      EXPECT_EQ(lean.top, got.sampled.top);
      ++rows;
      kept_sizes.insert(got.kept);
      // Summation orders differ only in the last bits: a different choice is allowed only
      // where a boundary is that close.
      if (want.margin < 1e-9) {
        ++near_boundary;
      } else {
        EXPECT_EQ(got.sampled.token, want.token);
        if (std::isinf(want.margin)) {
          EXPECT_EQ(got.margin, want.margin);
        } else {
          EXPECT_NEAR(got.margin, want.margin, 1e-9);
        }
      }
      if (got.sampled.token == want.token) {
        if (std::isinf(want.logprob)) {
          EXPECT_EQ(got.sampled.logprob, want.logprob);
        } else {
          EXPECT_NEAR(got.sampled.logprob, want.logprob, 1e-5 * std::max(1.0f, std::abs(want.logprob)));
        }
      }
      ASSERT_EQ(got.sampled.top.size(), want.top.size());
      for (size_t j = 0; j < want.top.size(); ++j) {
        EXPECT_EQ(got.sampled.top[j].first, want.top[j].first) << j;
        if (std::isinf(want.top[j].second)) {
          EXPECT_EQ(got.sampled.top[j].second, want.top[j].second);
        } else {
          EXPECT_NEAR(got.sampled.top[j].second, want.top[j].second,
                      1e-5 * std::max(1.0f, std::abs(want.top[j].second)));
        }
      }
    }
  }
  EXPECT_LE(near_boundary, rows / 100);
  EXPECT_GT(kept_sizes.size(), 30u);  // the filters kept many different set sizes
}

// sample_rows: one row split over every core, or rows side by side, is sample() bit for bit.
TEST(SamplingReference, SampleRowsIsSampleBitForBit) {
  std::mt19937_64 rng(99);
  const int64_t vocab = 151936;  // 19 chunks of 8192
  std::normal_distribution<float> normal(0, 3);
  std::vector<float> logits(static_cast<size_t>(vocab * 3));
  for (float& v : logits) v = normal(rng);
  std::vector<SamplingParams> ps(3);
  ps[0].temperature = 0.7f, ps[0].top_p = 0.9f, ps[0].logprobs = 5;
  ps[1].temperature = 1.1f, ps[1].min_p = 0.01f, ps[1].repetition_penalty = 1.2f;
  ps[2].temperature = 0, ps[2].logprobs = 3;
  const std::vector<int> prompt = {1, 5, 9, 151935}, output = {5, 5, 42};
  std::vector<cpu::SampleRow> rows;
  for (int r = 0; r < 3; ++r) {
    ps[size_t(r)].seed = uint64_t(r) * 7 + 1;
    rows.push_back({logits.data() + r * vocab, &ps[size_t(r)], prompt, output, uint64_t(r), r != 1});
  }
  auto same = [](const cpu::SampledToken& a, const cpu::SampledToken& b) {
    EXPECT_EQ(a.token, b.token);
    EXPECT_EQ(std::memcmp(&a.logprob, &b.logprob, 4), 0) << a.logprob << " " << b.logprob;
    EXPECT_EQ(a.top, b.top);
  };
  const std::vector<cpu::SampledToken> together = cpu::sample_rows(rows, vocab);
  ASSERT_EQ(together.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    const cpu::SampledToken alone = cpu::sample(rows[size_t(r)].logits, vocab, ps[size_t(r)], prompt, output,
                                                uint64_t(r), r != 1);
    same(together[size_t(r)], alone);
    same(cpu::sample_rows(std::span(&rows[size_t(r)], 1), vocab).at(0), alone);  // split over the cores
  }
}

// A greedy row with nothing else asked (no logprob), under a mask or not, takes a one-pass path: the same
// token as the general path (which a logprob request takes), for sparse and dense masks, NaN and
// ±inf logits, ties, a mask whose allowed logits are all −inf, and the vocabulary's last word.
TEST(SamplingReference, GreedyUnderAMaskIsTheGeneralPathsToken) {
  std::mt19937_64 rng(7);
  const int64_t vocab = 1000;  // not a multiple of 32: the mask's last word is partly outside
  std::normal_distribution<float> normal(0, 3);
  const SamplingParams greedy{.temperature = 0};
  int checked = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& v : logits) v = std::round(normal(rng) * 2) / 2;  // halves: many equal values
    for (int k = 0; k < 20; ++k) {
      const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), -0.0f};
      logits[size_t(rng() % uint64_t(vocab))] = specials[trial % 4 == 0 ? k % 4 : 2 + k % 2];
    }
    std::vector<uint32_t> mask(size_t((vocab + 31) / 32) + 1, 0);
    const uint64_t density = 1 + uint64_t(trial % 5) * 25;  // percent allowed: 1 … 101
    for (int64_t i = 0; i < vocab; ++i) {
      if (rng() % 100 < density) mask[size_t(i >> 5)] |= 1u << (i & 31);
    }
    mask.back() = ~0u;     // bits past the vocabulary are ignored
    if (trial % 7 == 0) {  // every allowed logit −inf (or NaN): the first allowed token
      for (int64_t i = 0; i < vocab; ++i) {
        if ((mask[size_t(i >> 5)] >> (i & 31)) & 1u) logits[size_t(i)] = trial % 2 ? -INFINITY : NAN;
      }
    }
    if (std::all_of(mask.begin(), mask.end() - 1, [](uint32_t w) { return w == 0; })) continue;
    const cpu::SampleRow fast{logits.data(), &greedy, {}, {}, 0, false, mask.data()};
    const cpu::SampleRow general{logits.data(), &greedy, {}, {}, 0, true, mask.data()};
    const int a = cpu::sample_rows(std::span(&fast, 1), vocab).at(0).token;
    const int b = cpu::sample_rows(std::span(&general, 1), vocab).at(0).token;
    EXPECT_EQ(a, b) << "trial " << trial;
    EXPECT_TRUE((mask[size_t(a >> 5)] >> (a & 31)) & 1u) << "trial " << trial;
    // No mask: the one-pass argmax, and the general path's.
    const cpu::SampleRow fast_all{logits.data(), &greedy, {}, {}, 0, false, nullptr};
    const cpu::SampleRow general_all{logits.data(), &greedy, {}, {}, 0, true, nullptr};
    EXPECT_EQ(cpu::sample_rows(std::span(&fast_all, 1), vocab).at(0).token,
              cpu::sample_rows(std::span(&general_all, 1), vocab).at(0).token)
        << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 150);
  std::vector<uint32_t> none(size_t((vocab + 31) / 32), 0);
  std::vector<float> logits(static_cast<size_t>(vocab), 0.0f);
  const cpu::SampleRow empty{logits.data(), &greedy, {}, {}, 0, false, none.data()};
  EXPECT_THROW(cpu::sample_rows(std::span(&empty, 1), vocab), Error);
}

TEST(SamplingReference, FrequenciesFollowTheDistributionOfTheDefinition) {
  // Eight tokens, temperature 0.8, top_k 6, top_p 0.95, a repeated output token: the expected
  // probabilities come from the oracle's definition, the draws from many seeds.
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.5f, -1.0f, 1.7f, 0.9f, -0.2f};
  const std::vector<int> output = {1, 1, 6};
  SamplingParams p{.temperature = 0.8f, .top_k = 6, .top_p = 0.95f, .frequency_penalty = 0.3f};
  // Expected: the oracle's kept set and weights, from its own arithmetic.
  std::vector<double> expected(8, 0);
  {
    std::vector<float> l = cpu::penalized_logits(logits.data(), 8, p, {}, output);
    std::vector<int> order(8);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[size_t(a)] > l[size_t(b)]; });
    std::vector<double> w;
    for (int id : order) w.push_back(std::exp((l[size_t(id)] - l[size_t(order[0])]) / p.temperature));
    double mass = 0;
    for (int j = 0; j < p.top_k; ++j) mass += w[size_t(j)];
    double cum = 0;
    for (int j = 0; j < p.top_k && cum < p.top_p * mass; ++j)
      cum += w[size_t(j)], expected[size_t(order[size_t(j)])] = w[size_t(j)];
    for (double& e : expected) e /= cum;
  }
  constexpr int kDraws = 40000;
  std::vector<int> counts(8, 0);
  for (int s = 0; s < kDraws; ++s) {
    p.seed = 0x9e3779b97f4a7c15ull * uint64_t(s + 1);
    ++counts[size_t(cpu::sample(logits.data(), 8, p, {}, output, 7).token)];
  }
  double chi2 = 0;
  int df = -1;
  for (int i = 0; i < 8; ++i) {
    if (expected[size_t(i)] == 0) {
      EXPECT_EQ(counts[size_t(i)], 0) << "token " << i << " is filtered out";
      continue;
    }
    const double e = expected[size_t(i)] * kDraws;
    chi2 += (counts[size_t(i)] - e) * (counts[size_t(i)] - e) / e;
    ++df;
  }
  ASSERT_GE(df, 3);
  // The 0.001 quantile of chi-square for 3..7 degrees of freedom is at most 24.3.
  EXPECT_LT(chi2, 24.3) << "df " << df;
}

// ---- the sampling family: spec, config, space, op, real compiles ----

TEST(SamplingSpec, CanonicalFormAndErrors) {
  const Family& f = family_of("sampling:op=sample,vocab=151936");
  EXPECT_EQ(f.name(), "sampling");
  EXPECT_EQ(f.canonical_spec("sampling:vocab=151936,op=sample"), "sampling:op=sample,vocab=151936,logprobs=0");
  EXPECT_EQ(f.canonical_spec("sampling:logprobs=20,op=sample,vocab=7"), "sampling:op=sample,vocab=7,logprobs=20");
  EXPECT_EQ(f.canonical_spec("sampling:op=argmax,vocab=128256"), "sampling:op=argmax,vocab=128256");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sampling:op=sample,vocab=151936,logprobs=21", "out of range"},
      {"sampling:op=argmax,vocab=151936,logprobs=5", "unknown field 'logprobs'"},
      {"sampling:op=sample,vocab=0", "out of range"},
      {"sampling:op=sample,vocab=524289", "out of range"},
      {"sampling:op=topk,vocab=100", "is not one of"},
      {"sampling:vocab=100", "missing field 'op'"},
      {"rmsnorm:hidden=8,dtype=f16,residual=0", "is not a sampling spec"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text);
    expect_throw<InputError>([&] { sampling::Spec::parse(text); }, {needle});
  }
}

TEST(SamplingConfig, ParseValidityAndDefaults) {
  const sampling::Spec sample = sampling::Spec::parse("sampling:op=sample,vocab=151936,logprobs=20");
  const sampling::Spec argmax = sampling::Spec::parse("sampling:op=argmax,vocab=151936");
  const sampling::Spec odd = sampling::Spec::parse("sampling:op=argmax,vocab=50021");
  EXPECT_EQ(sampling::Config::parse(sample, "cap=2048,threads=256").to_string(), "threads=256,cap=2048");
  EXPECT_EQ(sampling::Config::parse(argmax, "split=4,unroll=8,vec=4,threads=128").to_string(),
            "threads=128,vec=4,unroll=8,split=4");
  const sampling::Spec largest = sampling::Spec::parse("sampling:op=sample,vocab=524288,logprobs=20");
  // Validity rules name the spec; field errors name the field.
  const std::vector<std::tuple<sampling::Spec, std::string, std::string>> bad = {
      {sample, "threads=384,cap=1024", "threads must be a power of two"},
      {sample, "threads=32,cap=1024", "threads must be a power of two from 64"},
      {sample, "threads=512,cap=1000", "cap must be a power of two"},
      {largest, "threads=1024,cap=4096", "bytes of shared memory exceed"},
      {odd, "threads=256,vec=4,unroll=4,split=1", "vec=4 needs a vocab divisible by 4"},
      {argmax, "threads=256,vec=4,unroll=3,split=1", "unroll must be 1, 2, 4 or 8"},
      {argmax, "threads=1024,vec=4,unroll=4,split=64", "fewer than one load per thread"},
  };
  for (const auto& [spec, text, needle] : bad) {
    SCOPED_TRACE(text);
    expect_throw<InputError>([&] { sampling::Config::parse(spec, text); }, {needle, spec.to_string()});
  }
  expect_throw<InputError>([&] { sampling::Config::parse(sample, "threads=512,cap=1024,split=2"); },
                           {"unknown field 'split'"});
  expect_throw<InputError>([&] { sampling::Config::parse(argmax, "threads=256,vec=4,unroll=4,split=1,cap=1024"); },
                           {"unknown field 'cap'"});
  // Defaults: valid at every bucket; argmax splits small batches, never large ones.
  for (int64_t m : {1, 2, 7, 64, 160, 1000, 65536}) {
    for (const auto& spec : {sample, argmax, odd}) {
      const sampling::Config c = sampling::default_config(spec, m);
      EXPECT_FALSE(c.invalid_reason(spec).has_value()) << spec.to_string() << " m=" << m;
    }
  }
  EXPECT_GT(sampling::default_config(argmax, 1).split, 1);
  EXPECT_EQ(sampling::default_config(argmax, 1000).split, 1);
  EXPECT_EQ(sampling::default_config(odd, 1).vec, 1);
  EXPECT_EQ(sampling::default_config(argmax, 1).vec, 4);
  // The largest vocabulary still has configs.
  EXPECT_FALSE(sampling::default_config(largest, 1).invalid_reason(largest).has_value());
  for (const auto& spec : {sample, argmax, odd, largest}) {
    const auto candidates = sampling::candidate_configs(spec);
    EXPECT_FALSE(candidates.empty()) << spec.to_string();
    for (const auto& c : candidates) EXPECT_FALSE(c.invalid_reason(spec).has_value()) << c.to_string();
  }
}

TEST(SamplingOp, ArgumentsAndGeometry) {
  const sampling::Spec sample = sampling::Spec::parse("sampling:op=sample,vocab=1001,logprobs=5");
  const sampling::Spec argmax = sampling::Spec::parse("sampling:op=argmax,vocab=4096");
  const sampling::Config sc = sampling::Config::parse(sample, "threads=256,cap=512");
  const sampling::Config ac = sampling::Config::parse(argmax, "threads=128,vec=4,unroll=2,split=4");
  sampling::Args a{.tokens = 1,
                   .token_logprobs = 2,
                   .top_ids = 3,
                   .top_logprobs = 4,
                   .logits = 5,
                   .params = 6,
                   .history_offsets = 7,
                   .history_ids = 8,
                   .history_table = 9,
                   .rows = 33};
  KernelCall call = sampling::make_call(sample, sc, a);
  EXPECT_EQ(call.count, 9);
  for (int i = 0; i < 9; ++i) {
    uint64_t v;
    std::memcpy(&v, call.values[size_t(i)].data(), 8);
    EXPECT_EQ(v, uint64_t(i + 1));
  }
  EXPECT_EQ(call.geometry.grid[0], 33u);
  EXPECT_EQ(call.geometry.block[0], 256u);
  EXPECT_EQ(call.geometry.dynamic_shared_bytes, unsigned(8 * 256 + 8 * 512 + 10368 + 4 * 32));
  EXPECT_EQ(sampling::workspace_bytes(sample, sc, 33), 0);
  EXPECT_EQ(sampling::history_table_bytes(100), 1600);

  KernelCall ac_call = sampling::make_call(argmax, ac, sampling::ArgmaxArgs{10, 20, 1000, 7});
  EXPECT_EQ(ac_call.count, 4);
  uint64_t partials, counters;
  std::memcpy(&partials, ac_call.values[2].data(), 8);
  std::memcpy(&counters, ac_call.values[3].data(), 8);
  EXPECT_EQ(partials, 1000u);
  EXPECT_EQ(counters, 1000u + 7 * 4 * 8);
  EXPECT_EQ(sampling::workspace_bytes(argmax, ac, 7), 7 * 4 * 8 + 7 * 4);
  EXPECT_EQ(ac_call.geometry.grid[0], 7u);
  EXPECT_EQ(ac_call.geometry.grid[1], 4u);
  expect_throw<InputError>([&] { sampling::make_call(argmax, ac, a); }, {"takes ArgmaxArgs"});
  expect_throw<InputError>([&] { sampling::make_call(sample, sc, sampling::ArgmaxArgs{}); }, {"takes sample Args"});
  a.rows = 0;
  expect_throw<InputError>([&] { sampling::make_call(sample, sc, a); }, {"at least one row"});
  // The emitted source names the generator, spec and config, and includes the body.
  const Emitted e = sampling::emit(sample, sc, Arch{70});
  EXPECT_TRUE(test::contains(e.source, "#include \"sampling/sample.cuh\""));
  EXPECT_EQ(e.kernel_expression, "onecat::sampling::sample_kernel<1001, 5, 256, 512>");
  EXPECT_EQ(sampling::emit(argmax, ac, Arch{90}).kernel_expression,
            "onecat::sampling::argmax_kernel<4096, 128, 4, 2, 4>");
}

TEST(SamplingOp, RowParamsCarryEverySetting) {
  const SamplingParams p{.temperature = 0.7f,
                         .top_k = 40,
                         .top_p = 0.9f,
                         .min_p = 0.05f,
                         .repetition_penalty = 1.1f,
                         .presence_penalty = 0.5f,
                         .frequency_penalty = -0.25f,
                         .seed = 99,
                         .logprobs = 7};
  const sampling::RowParams r = cpu::row_params(p, 12345678901ull, 17);
  EXPECT_EQ(r.temperature, 0.7f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.min_p, 0.05f);
  EXPECT_EQ(r.repetition_penalty, 1.1f);
  EXPECT_EQ(r.presence_penalty, 0.5f);
  EXPECT_EQ(r.frequency_penalty, -0.25f);
  EXPECT_EQ(r.seed, 99u);
  EXPECT_EQ(r.logprobs, 7);
  EXPECT_EQ(r.step, 12345678901ull);
  EXPECT_EQ(r.prompt_length, 17);
}

// Every default and candidate config of common vocabularies builds with NVRTC for sm_70 and
// sm_90 without spills.
TEST(SamplingStaticQuality, ConfigsCompileWithoutSpills) {
  std::vector<CompileRequest> reqs;
  std::set<std::string> seen;
  auto add = [&](const std::string& spec, const std::string& config, Arch arch) {
    if (seen.insert(spec + "|" + config + "|" + arch.name()).second) {
      reqs.push_back(CompileRequest::make(family_of(spec), spec, config, arch));
    }
  };
  for (Arch arch : {Arch{70}, Arch{90}}) {
    for (const char* spec :
         {"sampling:op=sample,vocab=151936,logprobs=20", "sampling:op=sample,vocab=262144,logprobs=20",
          "sampling:op=sample,vocab=50021,logprobs=0", "sampling:op=sample,vocab=7,logprobs=3",
          "sampling:op=argmax,vocab=151936", "sampling:op=argmax,vocab=50021"}) {
      const Family& f = family_of(spec);
      for (int64_t m : {1, 64, 1024}) add(spec, f.default_config(spec, m, arch), arch);
    }
    for (const auto& c : family_of("sampling:op=sample,vocab=128256")
                             .candidate_configs("sampling:op=sample,vocab=128256,logprobs=20", arch)) {
      add("sampling:op=sample,vocab=128256,logprobs=20", c, arch);
    }
  }
  ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, false));
}

}  // namespace
}  // namespace onecat
