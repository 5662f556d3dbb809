#include "engine/speculative.h"

#include <algorithm>

#include "base/error.h"

namespace onecat::engine {

float random_uniform(uint64_t seed, uint64_t step, RandomStream stream) {
  const auto x = cpu::philox4x32_10({uint32_t(step), uint32_t(step >> 32), uint32_t(stream), 0},
                                    {uint32_t(seed), uint32_t(seed >> 32)});
  return float((x[0] >> 8) + 1) * 0x1p-24f;
}

int draw(std::span<const std::pair<int, double>> distribution, double u) {
  double total = 0;
  for (const auto& [id, mass] : distribution) total += mass;
  const double target = u * total;
  double cum = 0;
  int last = -1;
  for (const auto& [id, mass] : distribution) {
    if (mass <= 0) continue;
    cum += mass;
    last = id;
    if (cum >= target) return id;
  }
  if (last < 0) throw Error("speculative: a draw from a distribution without mass");
  return last;
}

int draw(std::span<const float> weights, double u) {
  double total = 0;
  for (float w : weights) total += w;
  const double target = u * total;
  double cum = 0;
  int last = -1;
  for (size_t id = 0; id < weights.size(); ++id) {
    if (weights[id] <= 0) continue;
    cum += weights[id];
    last = int(id);
    if (cum >= target) return last;
  }
  if (last < 0) throw Error("speculative: a draw from a distribution without mass");
  return last;
}

namespace {

// Certain drafts: row i sampled as the plain sampler would (stream kToken at its step); the
// draft is accepted iff that is what it drew.
Verified verify_certain(const DraftRows& d, std::span<const int> history) {
  const cpu::SamplingParams& p = *d.params;
  const size_t m = d.drafts.size();
  const bool logprob = p.logprobs > 0;
  // Row i: the history with the drafts before it, and its token's index in the output.
  auto row = [&](size_t i) {
    const size_t at = d.output.size() + i;
    return cpu::SampleRow{d.rows[i], &p, d.prompt, history.subspan(0, at), at, logprob};
  };
  Verified v;
  // Large rows: every row at once on every core (a row past a rejection is wasted work, but
  // rows in parallel beat rows one after another). Small ones: in order, stopping early.
  if (d.vocab * int64_t(m + 1) >= (int64_t(1) << 16)) {
    std::vector<cpu::SampleRow> rows;
    for (size_t i = 0; i <= m; ++i) rows.push_back(row(i));
    std::vector<cpu::SampledToken> got = cpu::sample_rows(rows, d.vocab);
    for (size_t i = 0; i <= m; ++i) {
      v.tokens.push_back(std::move(got[i]));
      if (i == m || v.tokens.back().token != d.drafts[i]) break;
    }
  } else {
    for (size_t i = 0; i <= m; ++i) {
      const cpu::SampleRow r = row(i);
      v.tokens.push_back(cpu::sample(r.logits, d.vocab, p, r.prompt_tokens, r.output_tokens, r.step, logprob));
      if (i == m || v.tokens.back().token != d.drafts[i]) break;
    }
  }
  v.accepted = int64_t(v.tokens.size()) - 1;
  return v;
}

// Drafts with distributions q: the rule itself, with the acceptance test on stream kAccept and
// the residual draw on stream kToken.
Verified verify_sampled(const DraftRows& d, std::span<const int> history) {
  const cpu::SamplingParams& p = *d.params;
  const size_t m = d.drafts.size();
  const bool logprob = p.logprobs > 0;
  auto with_logprobs = [&](size_t i, int token) {
    return logprob ? cpu::token_logprobs(d.rows[i], d.vocab, token, p.logprobs) : cpu::SampledToken{token, 0, {}};
  };
  Verified v;
  for (size_t i = 0; i < m; ++i) {
    const std::span<const int> before = history.subspan(0, d.output.size() + i);
    const uint64_t step = d.output.size() + i;
    // p and q alike as fp32 masses, each renormalised by its sum in id order: a drafter whose q is
    // the target's p (self-drafting, a q computed from the same logits) gives bitwise equal
    // ratios, so p/q = 1 exactly and no rounding residue is ever drawn from.
    std::vector<std::pair<int, double>> target = cpu::sampling_distribution(d.rows[i], d.vocab, p, d.prompt, before);
    double p_total = 0;
    for (auto& [id, mass] : target) mass = double(float(mass)), p_total += mass;
    const std::vector<float>& q = d.q[i];
    double q_total = 0;
    for (float w : q) q_total += w;
    const int x = d.drafts[i];
    double px = 0;
    for (const auto& [id, mass] : target) px += id == x ? mass / p_total : 0;
    const double qx = q_total > 0 ? double(q[size_t(x)]) / q_total : 0;
    // u·q(x) ≤ p(x) has probability min(1, p(x)/q(x)) for u uniform in (0, 1].
    if (double(random_uniform(p.seed, step, RandomStream::kAccept)) * qx <= px && px > 0) {
      v.tokens.push_back(with_logprobs(i, x));
      continue;
    }
    std::vector<std::pair<int, double>> residual;
    for (const auto& [id, mass] : target) {
      const double r = mass / p_total - (q_total > 0 ? double(q[size_t(id)]) / q_total : 0);
      if (r > 0) residual.emplace_back(id, r);
    }
    const double u = random_uniform(p.seed, step, RandomStream::kToken);
    // No residual mass only by rounding (p ≤ q everywhere means p = q, and then x is accepted):
    // draw from p.
    v.tokens.push_back(with_logprobs(i, residual.empty() ? draw(target, u) : draw(residual, u)));
    v.accepted = int64_t(i);
    return v;
  }
  v.tokens.push_back(cpu::sample(d.rows[m], d.vocab, p, d.prompt, history.subspan(0, d.output.size() + m),
                                 d.output.size() + m, logprob));
  v.accepted = int64_t(m);
  return v;
}

}  // namespace

Verified verify_drafts(const DraftRows& d) {
  const size_t m = d.drafts.size();
  if (d.rows.size() != m + 1) throw Error("speculative: m drafts need m + 1 rows of logits");
  if (!d.q.empty() && d.q.size() != m) throw Error("speculative: a draft's q must be given for every token or none");
  for (size_t i = 0; i < d.q.size(); ++i) {
    if (int64_t(d.q[i].size()) != d.vocab) throw Error("speculative: a draft's q must cover the vocabulary");
  }
  for (int32_t x : d.drafts) {
    if (x < 0 || x >= d.vocab) throw Error("speculative: a draft token outside the vocabulary");
  }
  std::vector<int> history(d.output.begin(), d.output.end());
  history.insert(history.end(), d.drafts.begin(), d.drafts.end());
  return d.q.empty() ? verify_certain(d, history) : verify_sampled(d, history);
}

}  // namespace onecat::engine
