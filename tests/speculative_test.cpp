// Speculative verification (engine/speculative.h) on a synthetic logits source: the tokens it
// emits have exactly the target's distribution — a chi-square bound over every continuation of
// 3 tokens, with drafts drawn from a different distribution q and with certain drafts — and a
// deliberately wrong rule (always accept) fails the same bound, so the test has power. Greedy
// requests give the target's own greedy chain whatever is drafted. Also cpu::sampling_distribution
// is what cpu::sample draws from, and the random streams' definitions.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "runtime/cpu/sampling.h"

namespace onecat {
namespace {

using engine::DraftRows;
using engine::RandomStream;
using engine::Verified;

constexpr int64_t kVocab = 5;

// Logits after `history` (prompt and output): a pseudo-random function of its length and last
// two tokens, so penalties and context both matter. The draft's are the target's plus noise.
std::vector<float> synthetic_logits(std::span<const int> history, uint32_t salt) {
  uint32_t h = 2166136261u ^ salt;
  for (uint32_t v : {uint32_t(history.size()), uint32_t(history[history.size() - 1]),
                     uint32_t(history.size() > 1 ? history[history.size() - 2] : 99)}) {
    h = (h ^ v) * 16777619u;
  }
  std::mt19937 rng(h);
  std::normal_distribution<float> normal(0, 1.5f);
  std::vector<float> out(kVocab);
  for (float& v : out) v = normal(rng);
  return out;
}
std::vector<float> target_logits(std::span<const int> history) { return synthetic_logits(history, 1); }
std::vector<float> draft_logits(std::span<const int> history) {
  std::vector<float> t = target_logits(history), noise = synthetic_logits(history, 2);
  for (int64_t i = 0; i < kVocab; ++i) t[size_t(i)] += noise[size_t(i)];
  return t;
}

// The target's rows over drafts after `history`: row i follows drafts[0, i) (k + 1 rows).
std::vector<std::vector<float>> target_rows(std::vector<int> history, std::span<const int32_t> drafts) {
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    rows.push_back(target_logits(history));
    if (i < drafts.size()) history.push_back(drafts[i]);
  }
  return rows;
}

// Every filter and penalty at once.
cpu::SamplingParams sampled_params() {
  cpu::SamplingParams p;
  p.temperature = 0.9f, p.top_k = 4, p.top_p = 0.97f, p.min_p = 0.01f;
  p.repetition_penalty = 1.3f, p.presence_penalty = 0.2f, p.frequency_penalty = 0.3f;
  return p;
}

// kAlwaysAccept and kResampleFromP are wrong rules the test must catch: accepting every draft,
// and resampling a rejected position from p instead of norm(max(0, p − q)).
enum class Rule { kRejection, kCertainDrafts, kAlwaysAccept, kResampleFromP };

const std::vector<int> kPrompt = {1, 3};
constexpr int kTokens = 3, kDrafts = 2;

// One request of kTokens, decoded k = kDrafts drafts a step (fewer near the end, as the engine
// does: a step never goes past max_tokens).
std::vector<int> generate(cpu::SamplingParams p, Rule rule) {
  std::vector<int> output;
  while (int(output.size()) < kTokens) {
    const int k = std::min(kDrafts, kTokens - int(output.size()) - 1);
    std::vector<int> history = kPrompt;
    history.insert(history.end(), output.begin(), output.end());
    // Drafts: sampled from the draft's distribution q (stream kDraft), or its greedy chain.
    std::vector<int32_t> drafts;
    std::vector<std::vector<float>> q;
    std::vector<int> drafted_output = output;
    for (int j = 0; j < k; ++j) {
      const std::vector<float> row = draft_logits(history);
      const uint64_t step = drafted_output.size();
      int x;
      if (rule == Rule::kCertainDrafts) {
        x = cpu::argmax(row.data(), kVocab);
      } else {
        const auto dist = cpu::sampling_distribution(row.data(), kVocab, p, kPrompt, drafted_output);
        x = engine::draw(dist, engine::random_uniform(p.seed, step, RandomStream::kDraft));
        std::vector<float>& dense = q.emplace_back(kVocab, 0.0f);
        for (const auto& [id, mass] : dist) dense[size_t(id)] = float(mass);
      }
      drafts.push_back(x);
      history.push_back(x);
      drafted_output.push_back(x);
    }
    // The target's rows over them: row i follows drafts[0, i).
    std::vector<int> h = kPrompt;
    h.insert(h.end(), output.begin(), output.end());
    const std::vector<std::vector<float>> rows = target_rows(h, drafts);
    std::vector<const float*> row_ptrs;
    for (const auto& r : rows) row_ptrs.push_back(r.data());
    if (rule == Rule::kAlwaysAccept) {
      output.insert(output.end(), drafts.begin(), drafts.end());
      output.push_back(cpu::sample(rows[size_t(k)].data(), kVocab, p, kPrompt, output, output.size()).token);
      continue;
    }
    if (rule == Rule::kResampleFromP) {
      for (int i = 0; i <= k; ++i) {
        const uint64_t step = output.size();
        if (i < k) {
          const auto dist = cpu::sampling_distribution(rows[size_t(i)].data(), kVocab, p, kPrompt, output);
          double px = 0;
          for (const auto& [id, mass] : dist) px += id == drafts[size_t(i)] ? mass : 0;
          const double u = engine::random_uniform(p.seed, step, RandomStream::kAccept);
          if (u * q[size_t(i)][size_t(drafts[size_t(i)])] <= px) {
            output.push_back(drafts[size_t(i)]);
            continue;
          }
        }
        output.push_back(cpu::sample(rows[size_t(i)].data(), kVocab, p, kPrompt, output, step).token);
        break;
      }
      continue;
    }
    const Verified v = engine::verify_drafts({row_ptrs, kVocab, drafts, q, &p, kPrompt, output});
    EXPECT_EQ(int64_t(v.tokens.size()), v.accepted + 1);
    for (const cpu::SampledToken& t : v.tokens) output.push_back(t.token);
  }
  output.resize(kTokens);
  return output;
}

// The target alone: the probability of every continuation of kTokens, from its exact
// distributions step by step.
std::map<std::vector<int>, double> exact(const cpu::SamplingParams& p) {
  std::map<std::vector<int>, double> out;
  std::vector<std::pair<std::vector<int>, double>> frontier = {{{}, 1.0}};
  for (int t = 0; t < kTokens; ++t) {
    std::vector<std::pair<std::vector<int>, double>> next;
    for (const auto& [output, mass] : frontier) {
      std::vector<int> history = kPrompt;
      history.insert(history.end(), output.begin(), output.end());
      const std::vector<float> row = target_logits(history);
      for (const auto& [id, pr] : cpu::sampling_distribution(row.data(), kVocab, p, kPrompt, output)) {
        std::vector<int> longer = output;
        longer.push_back(id);
        next.emplace_back(longer, mass * pr);
      }
    }
    frontier = std::move(next);
  }
  for (const auto& [output, mass] : frontier) out[output] += mass;
  return out;
}

struct Fit {
  double chi2 = 0, critical = 0, tv = 0;
  int64_t impossible = 0;  // samples the target could never give
};

// Pearson's chi-square of `samples` seeds against the exact distribution (cells expecting fewer
// than 5 pooled into one), with the critical value at p = 1e-6 (Wilson–Hilferty), and the total
// variation distance.
Fit fit(const cpu::SamplingParams& params, Rule rule, int samples) {
  const std::map<std::vector<int>, double> want = exact(params);
  std::map<std::vector<int>, int64_t> got;
  cpu::SamplingParams p = params;
  for (int s = 0; s < samples; ++s) {
    p.seed = uint64_t(s) * 0x9E3779B97F4A7C15ull + 12345;
    ++got[generate(p, rule)];
  }
  Fit f;
  double pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (const auto& [output, mass] : want) {
    const double expected = mass * samples;
    const auto it = got.find(output);
    const double observed = it == got.end() ? 0 : double(it->second);
    f.tv += std::abs(observed / samples - mass) / 2;
    if (expected < 5) {
      pooled_expected += expected, pooled_observed += observed;
      continue;
    }
    f.chi2 += (observed - expected) * (observed - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0) {
    f.chi2 += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  for (const auto& [output, count] : got) {
    if (!want.contains(output)) f.impossible += count, f.tv += double(count) / samples / 2;
  }
  const double df = cells - 1, z = 4.753;  // the normal's upper 1e-6 quantile
  f.critical = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  return f;
}

TEST(Speculative, RejectionSamplingKeepsTheTargetDistribution) {
  const cpu::SamplingParams p = sampled_params();
  constexpr int kSamples = 30000;
  const Fit rejection = fit(p, Rule::kRejection, kSamples);
  EXPECT_EQ(rejection.impossible, 0);
  EXPECT_LT(rejection.chi2, rejection.critical) << "tv " << rejection.tv;
  EXPECT_LT(rejection.tv, 0.03);
  const Fit certain = fit(p, Rule::kCertainDrafts, kSamples);
  EXPECT_EQ(certain.impossible, 0);
  EXPECT_LT(certain.chi2, certain.critical) << "tv " << certain.tv;
  EXPECT_LT(certain.tv, 0.03);
  // Power: accepting every draft gives the draft's distribution, and the same bound sees it; so
  // it does the subtler slip of resampling a rejected position from p.
  const Fit wrong = fit(p, Rule::kAlwaysAccept, kSamples);
  EXPECT_GT(wrong.chi2, 10 * wrong.critical) << "tv " << wrong.tv;
  EXPECT_GT(wrong.tv, 0.1);
  const Fit from_p = fit(p, Rule::kResampleFromP, kSamples);
  EXPECT_GT(from_p.chi2, from_p.critical) << "tv " << from_p.tv;
  for (const auto& [name, f] : {std::pair{"rejection", rejection},
                                {"certain drafts", certain},
                                {"always accept", wrong},
                                {"resample from p", from_p}}) {
    std::printf("%-15s chi2 %9.1f (bound %.1f)  tv %.4f\n", name, f.chi2, f.critical, f.tv);
  }
}

TEST(Speculative, CertainDraftsReplayThePlainSampler) {
  // With certain drafts a token is the plain sampler's own draw at its step: the output is the
  // one the target gives alone, seed for seed.
  cpu::SamplingParams p = sampled_params();
  for (uint64_t seed = 0; seed < 200; ++seed) {
    p.seed = seed;
    std::vector<int> plain;
    for (int t = 0; t < kTokens; ++t) {
      std::vector<int> history = kPrompt;
      history.insert(history.end(), plain.begin(), plain.end());
      plain.push_back(cpu::sample(target_logits(history).data(), kVocab, p, kPrompt, plain, plain.size()).token);
    }
    EXPECT_EQ(generate(p, Rule::kCertainDrafts), plain) << "seed " << seed;
  }
}

TEST(Speculative, GreedyRequestsGiveTheTargetsGreedyChain) {
  cpu::SamplingParams p = sampled_params();
  p.temperature = 0;  // greedy, with the penalties
  std::vector<int> chain;
  for (int t = 0; t < kTokens; ++t) {
    std::vector<int> history = kPrompt;
    history.insert(history.end(), chain.begin(), chain.end());
    const std::vector<float> row = target_logits(history);
    const std::vector<float> l = cpu::penalized_logits(row.data(), kVocab, p, kPrompt, chain);
    chain.push_back(cpu::argmax(l.data(), kVocab));
  }
  for (uint64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    EXPECT_EQ(generate(p, Rule::kCertainDrafts), chain);
    // Drafts with a distribution q against a greedy target: p is a point mass.
    std::vector<int32_t> drafts = {2, 0};
    std::vector<std::vector<float>> q(2, std::vector<float>(kVocab, 0.2f));
    const std::vector<std::vector<float>> rows = target_rows(kPrompt, drafts);
    const std::vector<const float*> ptrs = {rows[0].data(), rows[1].data(), rows[2].data()};
    const Verified v = engine::verify_drafts({ptrs, kVocab, drafts, q, &p, kPrompt, {}});
    ASSERT_GE(v.tokens.size(), 1u);
    EXPECT_EQ(v.tokens[0].token, chain[0]);
    if (v.accepted >= 1) {
      EXPECT_EQ(drafts[0], chain[0]);
    }
  }
}

TEST(Speculative, LogprobsAreTheSamplersOwn) {
  cpu::SamplingParams p = sampled_params();
  p.logprobs = 3;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    p.seed = seed;
    const std::vector<int32_t> drafts = {int32_t(seed % kVocab), int32_t((seed / 5) % kVocab)};
    const std::vector<std::vector<float>> rows = target_rows(kPrompt, drafts);
    const std::vector<const float*> ptrs = {rows[0].data(), rows[1].data(), rows[2].data()};
    const std::vector<std::vector<float>> q(2, std::vector<float>(kVocab, 0.2f));
    for (bool with_q : {false, true}) {
      const Verified v = engine::verify_drafts(
          {ptrs, kVocab, drafts, with_q ? std::span(q) : std::span<const std::vector<float>>(), &p, kPrompt, {}});
      for (size_t i = 0; i < v.tokens.size(); ++i) {
        const cpu::SampledToken want = cpu::token_logprobs(rows[i].data(), kVocab, v.tokens[i].token, 3);
        EXPECT_EQ(v.tokens[i].logprob, want.logprob);
        EXPECT_EQ(v.tokens[i].top, want.top);
      }
    }
  }
}

TEST(Speculative, SamplingDistributionIsWhatSampleDrawsFrom) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 3);
  const std::vector<int> prompt = {1, 2, 2}, output = {7, 7, 3};
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<float> row(64);
    for (float& v : row) v = normal(rng);
    cpu::SamplingParams p;
    p.temperature = 0.3f + 0.1f * float(trial % 10);
    p.top_k = trial % 3 == 0 ? 9 : 0;
    p.top_p = trial % 4 == 1 ? 0.8f : 1;
    p.min_p = trial % 5 == 2 ? 0.05f : 0;
    p.repetition_penalty = trial % 2 ? 1.4f : 1;
    p.frequency_penalty = trial % 3 == 1 ? 0.5f : 0;
    const auto dist = cpu::sampling_distribution(row.data(), 64, p, prompt, output);
    double total = 0;
    for (const auto& [id, mass] : dist) total += mass;
    EXPECT_NEAR(total, 1, 1e-12);
    // sample() is the inverse CDF of this distribution at philox_uniform(seed, step).
    int differ = 0;
    for (uint64_t step = 0; step < 200; ++step) {
      p.seed = uint64_t(trial);
      const int token = cpu::sample(row.data(), 64, p, prompt, output, step).token;
      differ += token != engine::draw(dist, cpu::philox_uniform(p.seed, step));
    }
    EXPECT_EQ(differ, 0) << "trial " << trial;
  }
  cpu::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<float> row = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(cpu::sampling_distribution(row.data(), 4, greedy, {}, {}), (std::vector<std::pair<int, double>>{{1, 1.0}}));
}

TEST(Speculative, RandomStreams) {
  for (uint64_t seed : {0ull, 7ull, 0x123456789abcdefull}) {
    for (uint64_t step : {0ull, 1ull, 1ull << 40}) {
      EXPECT_EQ(engine::random_uniform(seed, step, RandomStream::kToken), cpu::philox_uniform(seed, step));
      EXPECT_NE(engine::random_uniform(seed, step, RandomStream::kAccept), cpu::philox_uniform(seed, step));
      EXPECT_NE(engine::random_uniform(seed, step, RandomStream::kDraft),
                engine::random_uniform(seed, step, RandomStream::kAccept));
    }
  }
  const std::vector<float> w = {0, 1, 0, 3};
  EXPECT_EQ(engine::draw(w, 1e-9), 1);
  EXPECT_EQ(engine::draw(w, 0.25), 1);
  EXPECT_EQ(engine::draw(w, 0.2500001), 3);
  EXPECT_EQ(engine::draw(w, 1.0), 3);
}

}  // namespace
}  // namespace onecat
