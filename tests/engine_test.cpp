// The serving engine (engine/) on the CPU backend, whose steps give the same bits whatever the
// batch (tests/model_forward_test.cpp): many concurrent requests of mixed lengths — chunked
// prefill, decodes mixed with prefills, preemption forced by a small pool, prefix-cache hits —
// each produce exactly what generate() produces for them alone; the page accounting returns to
// zero; the block manager's reference counts, cache and eviction order.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "engine/block_manager.h"
#include "engine/draft_model.h"
#include "engine/drafter.h"
#include "engine/grammar.h"
#include "engine/greedy_ab.h"
#include "engine/json_schema.h"
#include "engine/regex_grammar.h"
#include "model_test_util.h"
#include "models/model/generate.h"
#include "models/model/generation_config.h"
#include "models/tokenizer/tokenizer.h"
#include "runtime/cpu/sampling.h"
#include "test_util.h"

namespace onecat {
namespace {

using engine::BlockManager;
using engine::Engine;
using engine::EngineOptions;
using engine::PageKey;
using engine::Request;

// ---------------------------------------------------------------------------------------------
// BlockManager

TEST(BlockManager, CountsReferencesAndFreesPages) {
  BlockManager b(4, 16);
  std::vector<int32_t> held;
  for (int i = 0; i < 4; ++i) held.push_back(*b.allocate());
  EXPECT_FALSE(b.allocate());
  EXPECT_EQ(b.available(), 0);
  EXPECT_EQ(b.total_references(), 4);
  for (int32_t p : held) b.release(p);
  EXPECT_EQ(b.available(), 4);
  EXPECT_EQ(b.total_references(), 0);
  test::expect_throw<Error>([&] { b.release(held[0]); }, {"not held"});
  test::expect_throw<Error>([&] { b.release(7); }, {"not held"});
}

TEST(BlockManager, SharesCachedPagesAndEvictsTheLeastRecentlyReleased) {
  BlockManager b(3, 2);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, c = {1, 2, 9, 9, 5};
  // Sequence a fills two pages and caches them.
  const int32_t p0 = *b.allocate(), p1 = *b.allocate();
  const PageKey k0 = PageKey{}.then(std::span(a).subspan(0, 2)), k1 = k0.then(std::span(a).subspan(2, 2));
  b.cache_full_page(k0, std::span(a).subspan(0, 2), p0);
  b.cache_full_page(k1, std::span(a).subspan(2, 2), p1);
  EXPECT_EQ(b.cached(), 2);
  // Another sequence with the same first page shares it (held twice), not the second.
  const BlockManager::Match m = b.match_prefix(c, 2);
  ASSERT_EQ(m.pages, std::vector<int32_t>{p0});
  EXPECT_EQ(m.keys, std::vector<PageKey>{k0});
  EXPECT_EQ(b.total_references(), 3);
  // At most max_pages, even when more match.
  const BlockManager::Match one = b.match_prefix(a, 1);
  EXPECT_EQ(one.pages, std::vector<int32_t>{p0});
  b.release(p0), b.release(p0), b.release(p0), b.release(p1);
  EXPECT_EQ(b.total_references(), 0);
  EXPECT_EQ(b.available(), 3);
  EXPECT_EQ(b.cached(), 2);  // released pages stay cached
  EXPECT_EQ(b.match_prefix(a, 2).pages, (std::vector<int32_t>{p0, p1}));
  b.release(p1), b.release(p0);         // p1 released first: evicted first
  const int32_t fresh = *b.allocate();  // the never-cached page goes first
  EXPECT_NE(fresh, p0);
  EXPECT_NE(fresh, p1);
  EXPECT_EQ(*b.allocate(), p1);
  EXPECT_EQ(b.cached(), 1);
  EXPECT_TRUE(b.match_prefix(a, 2).pages == std::vector<int32_t>{p0});  // p0 still cached, p1 gone
}

TEST(BlockManager, KeysDependOnEveryEarlierToken) {
  const std::vector<int32_t> x = {1, 2, 3, 4}, y = {2, 1, 3, 4};
  const PageKey kx = PageKey{}.then(std::span(x).subspan(0, 2)).then(std::span(x).subspan(2, 2));
  const PageKey ky = PageKey{}.then(std::span(y).subspan(0, 2)).then(std::span(y).subspan(2, 2));
  EXPECT_NE(kx, ky);  // same last page, different prefix
  BlockManager b(2, 2);
  const int32_t p = *b.allocate();
  b.cache_full_page(PageKey{}.then(std::span(x).subspan(0, 2)), std::span(x).subspan(0, 2), p);
  EXPECT_TRUE(b.match_prefix(y, 1).pages.empty());
  BlockManager off(2, 2, false);
  const int32_t q = *off.allocate();
  off.cache_full_page(PageKey{}.then(std::span(x).subspan(0, 2)), std::span(x).subspan(0, 2), q);
  EXPECT_EQ(off.cached(), 0);
  EXPECT_TRUE(off.match_prefix(x, 1).pages.empty());
}

// ---------------------------------------------------------------------------------------------
// Engine (checkpoints whose greedy runs do not collapse onto one token, so a wrong K/V shows)

// The model the engine runs: 64 tokens and 8 sequences per step at most.
ModelOptions engine_model(int64_t kv_cache_tokens = 2048) {
  ModelOptions o = options(64, kv_cache_tokens);
  o.max_sequences = 8;
  return o;
}

struct Job {
  std::vector<int32_t> prompt;
  int64_t max_tokens;
  cpu::SamplingParams sampling = model::GenerateOptions::greedy();
  int num_draft_tokens = -1;
};

// What generate() gives each job alone, on a model of its own.
std::vector<std::vector<int32_t>> alone(const LoadedModel& loaded, const std::vector<Job>& jobs) {
  Model m(loaded, options(64, 2048));
  std::vector<std::vector<int32_t>> out;
  for (const Job& j : jobs) {
    model::GenerateOptions g;
    g.max_tokens = j.max_tokens;
    g.sampling = j.sampling;
    out.push_back(model::generate(m, j.prompt, g).tokens);
  }
  return out;
}

// Runs every job through one engine at once; each one's tokens, in job order.
std::vector<std::vector<int32_t>> together(Engine& e, const std::vector<Job>& jobs) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Request r;
    r.prompt = jobs[i].prompt, r.max_tokens = jobs[i].max_tokens, r.sampling = jobs[i].sampling;
    r.num_draft_tokens = jobs[i].num_draft_tokens;
    index[e.add(r)] = i;
  }
  std::vector<std::vector<int32_t>> out(jobs.size());
  std::vector<bool> done(jobs.size(), false);
  for (int guard = 0; !e.idle(); ++guard) {
    if (guard > 100000) throw Error("the engine does not finish");
    for (const engine::StepOutput& o : e.step()) {
      const size_t i = index.at(o.id);
      EXPECT_FALSE(done[i]) << "request " << o.id << " reported after it finished";
      out[i].push_back(o.token);
      if (o.finished) {
        done[i] = true;
        EXPECT_EQ(o.finish_reason, "length");
      }
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_TRUE(done[i]) << "job " << i;
  EXPECT_EQ(e.blocks().total_references(), 0) << "every page let go";
  return out;
}

std::vector<Job> mixed_jobs(int64_t vocab, uint32_t seed) {
  std::vector<Job> jobs;
  const int64_t lengths[] = {1, 5, 17, 33, 64, 70, 100, 3, 16, 48, 90, 31};
  for (size_t i = 0; i < std::size(lengths); ++i) {
    jobs.push_back({random_prompt(lengths[i], vocab, seed + uint32_t(i)), int64_t(4 + (i * 7) % 23)});
  }
  return jobs;
}

TEST(Engine, ConcurrentRequestsGiveWhatEachGivesAlone) {
  const LoadedModel loaded = load(Checkpoints::of("mistral", "awq4"));
  const std::vector<Job> jobs = mixed_jobs(loaded.config.vocab, 100);
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  Model m(loaded, engine_model());
  Engine e(m, {.max_num_batched_tokens = 48, .max_num_seqs = 6});
  EXPECT_EQ(together(e, jobs), want);
  EXPECT_EQ(e.stats().preemptions, 0);
  EXPECT_GT(e.stats().steps, 0);
  // Several requests shared steps: fewer steps than one request after another would take.
  int64_t alone_steps = 0;
  for (const Job& j : jobs) alone_steps += (int64_t(j.prompt.size()) + 47) / 48 + j.max_tokens - 1;
  EXPECT_LT(e.stats().steps, alone_steps);
}

// A mixture-of-experts model routes each token alone: batching changes no output either.
TEST(Engine, MoeConcurrentRequestsGiveWhatEachGivesAlone) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3moe", "awq4"));
  ASSERT_TRUE(loaded.config.is_moe());
  const std::vector<Job> jobs = mixed_jobs(loaded.config.vocab, 300);
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  // max_model_len exactly the longest job's prompt + max_tokens − 1 (100 + 23 − 1): block-table
  // rows of 8 pages in a pool of 128.
  ModelOptions o = engine_model();
  o.max_model_len = 122;
  Model m(loaded, o);
  Engine e(m, {.max_num_batched_tokens = 40, .max_num_seqs = 5});
  EXPECT_EQ(together(e, jobs), want);
}

TEST(Drafter, NgramLookupTakesTheLatestMatchOfTheLongestSuffix) {
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 2, 3, 5, 6, 1, 2, 3};
  // Suffix [1 2 3] (n = 3) matched at 0: what followed it.
  EXPECT_EQ(engine::ngram_draft(t, 2, 1, 3), (std::vector<int32_t>{4, 9}));
  // With n ≤ 2, suffix [2 3]: its latest earlier match is at 5, followed by 5 6 1.
  EXPECT_EQ(engine::ngram_draft(t, 3, 1, 2), (std::vector<int32_t>{5, 6, 1}));
  EXPECT_EQ(engine::ngram_draft(t, 10, 1, 2), (std::vector<int32_t>{5, 6, 1, 2, 3}));  // up to the end
  EXPECT_TRUE(engine::ngram_draft(t, 0, 1, 3).empty());
  EXPECT_TRUE(engine::ngram_draft(std::vector<int32_t>{1, 2, 3, 4}, 3, 1, 3).empty());  // no repeat
  EXPECT_EQ(engine::ngram_draft(std::vector<int32_t>{7, 7}, 3, 1, 3), (std::vector<int32_t>{7}));
  EXPECT_TRUE(engine::ngram_draft(std::vector<int32_t>{7}, 3, 1, 3).empty());
}

// Jobs whose prompts repeat themselves, so n-gram drafts get accepted.
std::vector<Job> repetitive_jobs(int64_t vocab, uint32_t seed) {
  std::vector<Job> jobs;
  for (int i = 0; i < 8; ++i) {
    const std::vector<int32_t> motif = random_prompt(3 + i % 5, vocab, seed + uint32_t(i));
    std::vector<int32_t> p;
    for (int r = 0; r < 2 + i % 4; ++r) p.insert(p.end(), motif.begin(), motif.end());
    jobs.push_back({p, int64_t(10 + 5 * (i % 4))});
  }
  return jobs;
}

// Speculation never changes an output: greedy requests are the target's greedy runs, and sampled
// ones (n-gram drafts are certain, verified by the plain sampler's own draw, engine/speculative.h)
// the plain sampler's, seed for seed — with drafts of 1 to 8 tokens and in a pool small enough
// to preempt.
TEST(Engine, SpeculativeOutputsEqualPlainOnes) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  const int64_t vocab = loaded.config.vocab;
  std::vector<Job> jobs = repetitive_jobs(vocab, 300);
  for (const Job& j : mixed_jobs(vocab, 310)) jobs.push_back(j);
  for (size_t i = 0; i < 4; ++i) {
    cpu::SamplingParams& p = jobs[i * 5].sampling;
    p.temperature = 0.8f, p.seed = 7 + i;
    if (i >= 2) p.top_p = 0.9f, p.top_k = 20, p.repetition_penalty = 1.2f, p.frequency_penalty = 0.3f;
  }
  jobs[1].sampling.repetition_penalty = 1.3f;  // greedy, not plain: verified by the sampler's argmax
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  // Every k from 1 to 8, each on one of three batch sizes (6, 3 and 1 sequences at once) and
  // both pools (240 tokens preempts), k = 1, 3 and 8 on both pools.
  std::vector<std::pair<int, int64_t>> runs;
  for (int k = 1; k <= 8; ++k) runs.push_back({k, k % 2 ? 2048 : 240});
  for (int k : {1, 3}) runs.push_back({k, 240});
  runs.push_back({8, 2048});
  for (auto [k, pool] : runs) {
    const int seqs = std::array{6, 3, 1}[size_t(k + (pool == 240)) % 3];
    SCOPED_TRACE("k " + std::to_string(k) + " pool " + std::to_string(pool) + " seqs " + std::to_string(seqs));
    Model m(loaded, engine_model(pool));
    Engine e(m, {.max_num_batched_tokens = 48, .max_num_seqs = seqs, .num_speculative_tokens = k});
    EXPECT_EQ(together(e, jobs), want);
    const engine::EngineStats& st = e.stats();
    EXPECT_GT(st.draft_tokens, 0);
    EXPECT_GT(st.accepted_tokens, 0) << "the repeated motifs are drafted and accepted";
    EXPECT_LE(st.accepted_tokens, st.draft_tokens);
    EXPECT_GT(st.draft_rounds, 0);
    ASSERT_EQ(st.drafted_at.size(), size_t(k));
    int64_t drafted = 0, accepted = 0;
    for (int i = 0; i < k; ++i) {
      drafted += st.drafted_at[size_t(i)], accepted += st.accepted_at[size_t(i)];
      EXPECT_LE(st.accepted_at[size_t(i)], st.drafted_at[size_t(i)]);
    }
    EXPECT_EQ(drafted, st.draft_tokens);
    EXPECT_EQ(accepted, st.accepted_tokens);
    EXPECT_EQ(st.drafted_at[0], st.draft_rounds);  // every round drafts a first token
    // Every generated token came from a step: with accepted drafts, fewer steps than tokens.
    EXPECT_EQ(st.generated_tokens, [&] {
      int64_t n = 0;
      for (const auto& w : want) n += int64_t(w.size());
      return n;
    }());
  }
  Model m(loaded, engine_model());
  test::expect_throw<InputError>([&] { Engine bad(m, {.num_speculative_tokens = 17}); }, {"num_speculative_tokens"});
  test::expect_throw<InputError>([&] { Engine bad(m, {.num_speculative_tokens = 2, .ngram_min = 3, .ngram_max = 2}); },
                                 {"ngram_min"});
  test::expect_throw<InputError>([&] { Engine bad(m, {.num_speculative_tokens = 2, .speculative = "medusa"}); },
                                 {"speculative must be ngram or draft:DIR", "medusa"});
}

// Sampled requests alone, at a low temperature on repetitive prompts, so their drafts are
// accepted too; each output (token, logprob, top logprobs) is the plain engine's.
TEST(Engine, SpeculativeSampledRequestsKeepTokensAndLogprobs) {
  const LoadedModel loaded = load(Checkpoints::of("mistral", "f16"));
  std::vector<Job> jobs = repetitive_jobs(loaded.config.vocab, 500);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].sampling = {.temperature = 0.3f,
                        .top_p = 0.95f,
                        .repetition_penalty = i % 4 == 1 ? 1.2f : 1.f,
                        .presence_penalty = i % 4 == 3 ? 0.2f : 0.f,
                        .frequency_penalty = i % 4 == 3 ? 0.2f : 0.f,
                        .seed = 40 + i,
                        .logprobs = int(i % 3)};
  }
  auto run = [&](int k) {
    Model m(loaded, engine_model());
    Engine e(m, {.max_num_batched_tokens = 48, .max_num_seqs = 6, .num_speculative_tokens = k});
    std::map<int64_t, std::vector<engine::StepOutput>> out;
    for (const Job& j : jobs) {
      Request r;
      r.prompt = j.prompt, r.max_tokens = j.max_tokens, r.sampling = j.sampling;
      out[e.add(r)];
    }
    while (!e.idle()) {
      for (engine::StepOutput& o : e.step()) out[o.id].push_back(std::move(o));
    }
    return std::pair(out, e.stats());
  };
  const auto [plain, plain_stats] = run(0);
  const auto [spec, stats] = run(4);
  ASSERT_EQ(plain.size(), spec.size());
  for (const auto& [id, outputs] : plain) {
    const std::vector<engine::StepOutput>& got = spec.at(id);
    ASSERT_EQ(got.size(), outputs.size()) << "request " << id;
    for (size_t t = 0; t < outputs.size(); ++t) {
      EXPECT_EQ(got[t].token, outputs[t].token) << "request " << id << " token " << t;
      EXPECT_EQ(got[t].logprob, outputs[t].logprob);
      EXPECT_EQ(got[t].top_logprobs, outputs[t].top_logprobs);
      EXPECT_EQ(got[t].finish_reason, outputs[t].finish_reason);
    }
  }
  EXPECT_EQ(plain_stats.draft_tokens, 0);
  EXPECT_GT(stats.accepted_tokens, 0);
}

// A request's own k: none (0), fewer than the engine's, or refused above it.
TEST(Engine, RequestsChooseTheirNumberOfDraftTokens) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  std::vector<Job> jobs = repetitive_jobs(loaded.config.vocab, 600);
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  for (Job& j : jobs) j.num_draft_tokens = 0;
  Model m(loaded, engine_model());
  Engine none(m, {.num_speculative_tokens = 4});
  EXPECT_EQ(together(none, jobs), want);
  EXPECT_EQ(none.stats().draft_tokens, 0);
  for (Job& j : jobs) j.num_draft_tokens = 2;
  Model m2(loaded, engine_model());
  Engine two(m2, {.num_speculative_tokens = 4});
  EXPECT_EQ(together(two, jobs), want);
  EXPECT_GT(two.stats().drafted_at[1], 0);
  EXPECT_EQ(two.stats().drafted_at[2], 0);
  EXPECT_EQ(two.stats().drafted_at[3], 0);
  Request r;
  r.prompt = {1, 2, 3}, r.num_draft_tokens = 5;
  test::expect_throw<InputError>([&] { two.add(r); }, {"num_draft_tokens", "(4), got 5"});
  Model m3(loaded, engine_model());
  Engine off(m3);
  r.num_draft_tokens = 1;
  test::expect_throw<InputError>([&] { off.add(r); }, {"num_draft_tokens"});
}

// A draft model (EngineOptions::speculative = "draft:DIR"). The target as its own draft: its
// greedy tokens are the target's, every draft accepted; sampled drafts are drawn from q = p
// (the CPU forward gives the same bits in any batch), so every one is accepted too.
TEST(Engine, SelfDraftingAcceptsEveryToken) {
  const std::string dir = Checkpoints::of("llama", "f16");
  const LoadedModel loaded = load(dir);
  const int64_t vocab = loaded.config.vocab;
  std::vector<Job> jobs = mixed_jobs(vocab, 700);
  jobs.resize(8);
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  for (int k : {1, 4}) {
    SCOPED_TRACE("k " + std::to_string(k));
    Model m(loaded, engine_model());
    Engine e(
        m,
        {.max_num_batched_tokens = 48, .max_num_seqs = 6, .num_speculative_tokens = k, .speculative = "draft:" + dir});
    EXPECT_EQ(together(e, jobs), want);
    EXPECT_GT(e.stats().draft_tokens, 0);
    EXPECT_EQ(e.stats().accepted_tokens, e.stats().draft_tokens) << "acceptance rate 1";
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].sampling = {
        .temperature = 0.8f, .top_p = i % 2 ? 0.9f : 1.f, .repetition_penalty = i % 3 ? 1.f : 1.2f, .seed = 70 + i};
  }
  Model m(loaded, engine_model());
  Engine e(
      m, {.max_num_batched_tokens = 48, .max_num_seqs = 6, .num_speculative_tokens = 3, .speculative = "draft:" + dir});
  together(e, jobs);
  EXPECT_GT(e.stats().draft_tokens, 0);
  EXPECT_EQ(e.stats().accepted_tokens, e.stats().draft_tokens) << "acceptance rate 1";
}

// A drafter on the target's hidden states (Drafter::wants_hidden_states) gets, with each request,
// the final hidden states of the rows that chose its newest tokens (one, or a verify step's
// accepted drafts and the token after them): each row · embed_tokensᵀ (the checkpoint ties its
// lm_head) is the CPU forward's logits at that row's position. Drafts are n-gram lookups, so
// some steps verify and keep several rows.
class HiddenStatesRecorder final : public engine::Drafter {
 public:
  struct Seen {
    std::vector<int32_t> tokens;
    std::vector<float> hidden;
  };
  std::vector<Seen> seen;
  std::vector<engine::Draft> propose(std::span<const engine::DraftRequest> requests) override {
    std::vector<engine::Draft> out;
    for (const engine::DraftRequest& r : requests) {
      seen.push_back({{r.tokens.begin(), r.tokens.end()}, {r.hidden.begin(), r.hidden.end()}});
      out.push_back({engine::ngram_draft(r.tokens, r.k, 1, 3), {}});
    }
    return out;
  }
  bool wants_hidden_states() const override { return true; }
};

TEST(Engine, DraftersGetTheTargetsHiddenStates) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "f16"));
  ASSERT_FALSE(loaded.lm_head.has_value()) << "the check below needs a tied lm_head";
  const int64_t vocab = loaded.config.vocab, width = loaded.config.hidden;
  std::vector<Job> jobs = mixed_jobs(vocab, 900);
  jobs.resize(4);
  auto recorder = std::make_shared<HiddenStatesRecorder>();
  Model m(loaded, engine_model());
  Engine e(m, {.max_num_batched_tokens = 48, .max_num_seqs = 4, .num_speculative_tokens = 3, .drafter = recorder});
  together(e, jobs);
  ASSERT_FALSE(recorder->seen.empty());
  Model ref(loaded, options(256));
  int several = 0;
  for (const HiddenStatesRecorder::Seen& s : recorder->seen) {
    ASSERT_FALSE(s.hidden.empty());
    ASSERT_EQ(s.hidden.size() % size_t(width), 0u);
    const int64_t rows = int64_t(s.hidden.size()) / width, n = int64_t(s.tokens.size());
    ASSERT_LT(rows, n);
    several += rows > 1;
    Sequence seq;
    const std::vector<float> all = ref.extend(seq, s.tokens, true);
    ref.release(seq);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t position = n - rows + i - 1;  // its logits chose tokens[position + 1]
      const float* want = all.data() + position * vocab;
      const auto [lo, hi] = std::minmax_element(want, want + vocab);
      for (int64_t v = 0; v < vocab; ++v) {
        float got = 0;
        for (int64_t j = 0; j < width; ++j) {
          got += s.hidden[size_t(i * width + j)] * cpu::half_to_float(loaded.embed_tokens[size_t(v * width + j)]);
        }
        ASSERT_NEAR(got, want[v], 1e-4f * (*hi - *lo)) << "position " << position << " token " << v;
      }
    }
  }
  EXPECT_GT(several, 0) << "no verify step kept more than one row";
}

// A draft model on a GPU whose target pool is sized from memory: the target leaves it its KV per
// page (the draft's layers × K and V of its KV heads, in the target's cache dtype) and its
// tensors and buffers; with a given pool, n-gram drafts, or on the CPU nothing changes.
TEST(Engine, ATargetLeavesRoomForItsDraftModel) {
  const std::string dir = Checkpoints::of("llama", "f16");
  const models::ModelConfig c = models::load_model(dir);
  model::ModelOptions o;
  o.device = model::Device::kCuda;
  o.kv_cache_tokens = 0;
  o.kv_cache_dtype = models::KvCacheDtype::kE4m3;
  const EngineOptions spec{.num_speculative_tokens = 3, .speculative = "draft:" + dir};
  engine::leave_room_for_draft(o, spec);
  EXPECT_EQ(o.draft_page_bytes, size_t(2 * c.layers * c.kv_heads * c.head_dim * o.page_size * 1));
  const size_t tensors = std::filesystem::file_size(std::filesystem::path(dir) / "model.safetensors");
  EXPECT_GT(o.draft_bytes, tensors + (size_t(256) << 20));
  EXPECT_LT(o.draft_bytes, tensors + (size_t(512) << 20));  // a tiny model's buffers are small
  model::ModelOptions given = o, cpu = o, ngram = o;
  given.draft_page_bytes = given.draft_bytes = 0, given.kv_cache_tokens = 4096;
  cpu.draft_page_bytes = cpu.draft_bytes = 0, cpu.device = model::Device::kCpu;
  ngram.draft_page_bytes = ngram.draft_bytes = 0;
  engine::leave_room_for_draft(given, spec);
  engine::leave_room_for_draft(cpu, spec);
  engine::leave_room_for_draft(ngram, {.num_speculative_tokens = 3, .speculative = "ngram"});
  for (const model::ModelOptions* unchanged : {&given, &cpu, &ngram}) {
    EXPECT_EQ(unchanged->draft_page_bytes, 0u);
    EXPECT_EQ(unchanged->draft_bytes, 0u);
  }
}

// --draft-p-min: a draft model stops drafting a request's step at a draft it is less sure of than
// p_min. Greedy outputs stay the target's; sampled requests still accept every draft of the
// checkpoint as its own draft (q = p: the cut, decided on the draft's own distribution before
// its draw, leaves the drafts exact); a higher p_min drafts fewer tokens, 1 (nothing is that sure
// under a random model) none; outside [0, 1] is one sentence.
TEST(Engine, DraftPMinCutsUnsureDraftsAndKeepsTheOutput) {
  const std::string dir = Checkpoints::of("llama", "f16");
  const std::string draft = Checkpoints::of("qwen3", "f16");
  const LoadedModel loaded = load(dir);
  std::vector<Job> jobs = mixed_jobs(loaded.config.vocab, 900);
  jobs.resize(8);
  for (size_t i = 4; i < jobs.size(); ++i) jobs[i].sampling = {.temperature = 0.8f, .seed = 90 + i};
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  int64_t previous = -1, first = 0;
  for (float p_min : {0.0f, 0.02f, 0.2f, 1.0f}) {
    SCOPED_TRACE("p_min " + std::to_string(p_min));
    Model m(loaded, engine_model());
    Engine e(m, {.max_num_batched_tokens = 48,
                 .max_num_seqs = 6,
                 .num_speculative_tokens = 4,
                 .speculative = "draft:" + dir,
                 .draft_p_min = p_min});
    const std::vector<std::vector<int32_t>> self = together(e, jobs);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(self[i], want[i]) << "greedy job " << i;
    EXPECT_EQ(e.stats().accepted_tokens, e.stats().draft_tokens) << "acceptance rate 1";
    const int64_t drafted = e.stats().draft_tokens;
    if (previous >= 0) {
      EXPECT_LE(drafted, previous);
    }
    EXPECT_EQ(drafted > 0, p_min < 1.0f);
    if (p_min == 0.2f) {
      EXPECT_LT(drafted, first) << "some drafts of the tiny random model are that unsure";
    }
    if (p_min == 0.0f) first = drafted;
    previous = drafted;
    // Another model as the draft: greedy outputs unchanged.
    Model m2(loaded, engine_model());
    Engine e2(m2, {.max_num_batched_tokens = 48,
                   .max_num_seqs = 6,
                   .num_speculative_tokens = 4,
                   .speculative = "draft:" + draft,
                   .draft_p_min = p_min});
    const std::vector<std::vector<int32_t>> got = together(e2, jobs);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << "greedy job " << i;
  }
  Model m(loaded, engine_model());
  test::expect_throw<InputError>(
      [&] { Engine bad(m, {.num_speculative_tokens = 2, .speculative = "draft:" + dir, .draft_p_min = 1.5f}); },
      {"--draft-p-min", "[0, 1]"});
}

// Another checkpoint as the draft (another architecture, the same vocabulary): greedy outputs
// stay the target's, in a pool small enough to preempt; a draft of another vocabulary is refused.
TEST(Engine, ADraftModelNeverChangesAGreedyOutput) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  const std::string draft = Checkpoints::of("qwen3", "f16");
  std::vector<Job> jobs = repetitive_jobs(loaded.config.vocab, 800);
  for (const Job& j : mixed_jobs(loaded.config.vocab, 810)) jobs.push_back(j);
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  for (const auto& [k, pool] : {std::pair<int, int64_t>{2, 2048}, {8, 240}}) {
    SCOPED_TRACE("k " + std::to_string(k) + " pool " + std::to_string(pool));
    Model m(loaded, engine_model(pool));
    Engine e(m, {.max_num_batched_tokens = 48,
                 .max_num_seqs = 6,
                 .num_speculative_tokens = k,
                 .speculative = "draft:" + draft});
    EXPECT_EQ(together(e, jobs), want);
    EXPECT_GT(e.stats().draft_tokens, 0);
    if (pool == 240) {
      EXPECT_GT(e.stats().preemptions, 0);
    }
  }
  const std::string other_vocab = Checkpoints::get("--arch llama --format f16 --shape '{\"vocab_size\": 96}'");
  Model m(loaded, engine_model());
  test::expect_throw<InputError>(
      [&] { Engine bad(m, {.num_speculative_tokens = 2, .speculative = "draft:" + other_vocab}); },
      {"vocabulary has 96 tokens and the target's 128", "share the target's tokenizer"});
}

TEST(Engine, PreemptionInASmallPoolLosesNothing) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "fp8"));
  std::vector<Job> jobs = mixed_jobs(loaded.config.vocab, 200);
  for (Job& j : jobs) j.max_tokens += 20;  // long enough to outgrow the pool together
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  Model m(loaded, engine_model(160));  // ten pages of 16 tokens
  Engine e(m, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  EXPECT_EQ(together(e, jobs), want);
  EXPECT_GT(e.stats().preemptions, 0);
}

TEST(Engine, PrefixCacheServesARepeatedPrompt) {
  const LoadedModel loaded = load(Checkpoints::of("mistral", "f16"));
  const std::vector<int32_t> shared = random_prompt(70, loaded.config.vocab, 7);
  std::vector<int32_t> longer = shared;
  longer.insert(longer.end(), {3, 1, 4, 1, 5});
  const std::vector<Job> first = {{shared, 6}}, second = {{shared, 6}, {longer, 9}};
  const std::vector<std::vector<int32_t>> want = alone(loaded, {first[0], second[1]});
  Model m(loaded, engine_model());
  Engine e(m);
  EXPECT_EQ(together(e, first)[0], want[0]);
  EXPECT_EQ(e.stats().prefix_hit_tokens, 0);
  const int64_t computed = e.stats().computed_tokens;
  const std::vector<std::vector<int32_t>> got = together(e, second);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[1]);
  // Both found the first 64 tokens (four full pages) cached, and computed only the rest.
  EXPECT_EQ(e.stats().prefix_hit_tokens, 2 * 64);
  EXPECT_EQ(e.stats().computed_tokens - computed, (70 - 64 + 5) + (75 - 64 + 8));
  Model off_model(loaded, engine_model());
  Engine off(off_model, {.prefix_caching = false});
  together(off, first);
  together(off, second);
  EXPECT_EQ(off.stats().prefix_hit_tokens, 0);
}

TEST(Engine, SampledRequestsAreReproducibleAndMatchGenerate) {
  const LoadedModel loaded = load(Checkpoints::of("qwen2", "nvfp4"));
  std::vector<Job> jobs = mixed_jobs(loaded.config.vocab, 300);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].sampling = {
        .temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .repetition_penalty = i % 2 ? 1.1f : 1.f, .seed = 1000 + i};
  }
  const std::vector<std::vector<int32_t>> want = alone(loaded, jobs);
  Model m(loaded, engine_model());
  Engine e(m, {.max_num_batched_tokens = 40, .max_num_seqs = 5});
  EXPECT_EQ(together(e, jobs), want);
}

// EngineOptions::device_sampling: on the CPU backend the sampler where the logits are is
// cpu::sample_rows too, so every output (token, logprob, top logprobs) equals the host path's,
// for sampled rows with penalties and logprobs beside greedy ones, a logit_bias request (its row
// sampled on the host in the same steps, the others' on the backend) and preemption-free chunked
// prefills.
TEST(Engine, DeviceSamplingGivesTheHostSamplersOutputs) {
  const LoadedModel loaded = load(Checkpoints::of("qwen2", "awq4"));
  std::vector<Job> jobs = mixed_jobs(loaded.config.vocab, 500);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i % 4 == 3) continue;  // greedy
    jobs[i].sampling = {.temperature = 0.8f,
                        .top_k = i % 3 ? 0 : 30,
                        .top_p = i % 2 ? 0.9f : 1.f,
                        .repetition_penalty = i % 5 ? 1.f : 1.2f,
                        .frequency_penalty = i % 6 == 1 ? 0.5f : 0.f,
                        .seed = 2000 + i,
                        .logprobs = int(i % 3)};
  }
  jobs[2].sampling.logit_bias = {{7, 5.f}};
  int64_t device_steps = 0;
  auto run = [&](bool device_sampling) {
    Model m(loaded, engine_model());
    Engine e(m, {.max_num_batched_tokens = 40, .max_num_seqs = 5, .device_sampling = device_sampling});
    std::map<int64_t, size_t> index;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Request r;
      r.prompt = jobs[i].prompt, r.max_tokens = jobs[i].max_tokens, r.sampling = jobs[i].sampling;
      index[e.add(r)] = i;
    }
    std::vector<std::vector<std::tuple<int32_t, float, std::vector<std::pair<int, float>>>>> out(jobs.size());
    while (!e.idle()) {
      for (const engine::StepOutput& o : e.step()) out[index.at(o.id)].emplace_back(o.token, o.logprob, o.top_logprobs);
    }
    if (device_sampling) {
      device_steps = e.stats().device_sampled_steps;
      EXPECT_LE(device_steps, e.stats().sampled_steps);
    } else {
      EXPECT_EQ(e.stats().device_sampled_steps, 0);
    }
    return out;
  };
  const auto host = run(false), device = run(true);
  EXPECT_EQ(device, host);
  EXPECT_GT(device_steps, 0);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(int64_t(host[i].size()), jobs[i].max_tokens) << "job " << i;
}

// logprobs = n: each output carries the token's raw logprob and the n best, as cpu::sample
// gives them for the same logits (those of generate's model alone, bit for bit on the CPU).
TEST(Engine, LogprobsAreTheSamplersOwn) {
  const LoadedModel loaded = load(Checkpoints::of("qwen2", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  const cpu::SamplingParams p{.temperature = 0.7f, .seed = 9, .logprobs = 3};
  const std::vector<int32_t> prompt = random_prompt(37, vocab, 4), other = random_prompt(20, vocab, 5);
  Model m(loaded, engine_model());
  Engine e(m, {.max_num_batched_tokens = 24});
  Request r, greedy;
  r.prompt = prompt, r.max_tokens = 6, r.sampling = p;
  greedy.prompt = other, greedy.max_tokens = 6, greedy.sampling = model::GenerateOptions::greedy();
  const int64_t id = e.add(r);
  e.add(greedy);
  std::vector<engine::StepOutput> got;
  while (!e.idle()) {
    for (engine::StepOutput& o : e.step()) {
      if (o.id == id) {
        got.push_back(std::move(o));
      } else {
        EXPECT_TRUE(o.top_logprobs.empty());  // not asked for
      }
    }
  }
  ASSERT_EQ(got.size(), 6u);
  Model alone(loaded, engine_model());
  Sequence s;
  std::vector<float> l = alone.extend(s, prompt);
  std::vector<int> output;
  for (const engine::StepOutput& o : got) {
    const cpu::SampledToken want = cpu::sample(l.data(), vocab, p, prompt, output, uint64_t(output.size()));
    EXPECT_EQ(o.token, want.token);
    EXPECT_EQ(o.logprob, want.logprob);
    EXPECT_EQ(o.top_logprobs, want.top);
    ASSERT_EQ(o.top_logprobs.size(), 3u);
    EXPECT_LE(o.logprob, o.top_logprobs[0].second);
    output.push_back(o.token);
    l = alone.extend(s, std::span(&o.token, 1));
  }
}

// log_softmax(row)[id] in double, and the n best ids (value descending, lower id first): an
// independent reference for the engine's prompt logprobs.
std::pair<double, std::vector<int>> reference_logprob(const float* row, int64_t vocab, int id, int n) {
  double m = -INFINITY, sum = 0;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, double(row[i]));
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - m);
  std::vector<int> order(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[size_t(i)] = int(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
  order.resize(size_t(n));
  return {double(row[id]) - m - std::log(sum), order};
}

// Request::prompt_logprobs: every prompt token's logprob (but the first's) under the model's
// own logits of the tokens before it (one forward of the whole prompt, every row), with chunks
// of 64 and of 7 tokens, next to other requests, with the prompt in the prefix cache (which it
// must not use), and preempted mid-prefill in a small pool; max_tokens 0 and 1.
TEST(Engine, PromptLogprobsAreThoseOfTheModelsOwnLogits) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  const int64_t vocab = loaded.config.vocab;
  const std::vector<int32_t> prompt = random_prompt(70, vocab, 11);
  const int64_t P = int64_t(prompt.size());
  const int top = 3;
  Model alone(loaded, engine_model());
  Sequence seq;
  const std::vector<float> rows = alone.extend(seq, prompt, true);  // [P][vocab]
  ASSERT_EQ(rows.size(), size_t(P * vocab));
  std::vector<engine::TokenLogprobs> want;
  double want_sum = 0;
  for (int64_t t = 0; t + 1 < P; ++t) {
    const float* row = rows.data() + size_t(t * vocab);
    const cpu::SampledToken x = cpu::token_logprobs(row, vocab, prompt[size_t(t + 1)], top);
    want.push_back({x.logprob, x.top});
    const auto [lp, best] = reference_logprob(row, vocab, prompt[size_t(t + 1)], top);
    EXPECT_NEAR(x.logprob, lp, 1e-5 * std::max(1.0, std::abs(lp))) << "place " << t;
    ASSERT_EQ(x.top.size(), size_t(top));
    for (int j = 0; j < top; ++j) EXPECT_EQ(x.top[size_t(j)].first, best[size_t(j)]) << "place " << t;
    want_sum += lp;
  }
  const int32_t next = int32_t(cpu::argmax(rows.data() + size_t((P - 1) * vocab), vocab));
  // Two requests decoding while it prefills: in the small pool (eight pages) their growth
  // preempts it, the latest arrival, mid-prefill.
  const std::vector<int32_t> others[] = {random_prompt(16, vocab, 12), random_prompt(16, vocab, 13)};

  struct Case {
    int64_t batched, pool;
    int64_t max_tokens;
  };
  for (const Case c : {Case{64, 2048, 1}, Case{7, 2048, 0}, Case{16, 128, 1}}) {
    SCOPED_TRACE("chunk " + std::to_string(c.batched) + " pool " + std::to_string(c.pool));
    Model m(loaded, engine_model(c.pool));
    Engine e(m, {.max_num_batched_tokens = c.batched, .max_num_seqs = 4});
    // The same prompt first without prompt logprobs: its full pages are cached when the
    // second, asking for them, is admitted after it.
    Request plain, asking;
    plain.prompt = asking.prompt = prompt;
    plain.sampling = asking.sampling = model::GenerateOptions::greedy();
    plain.max_tokens = 2;
    asking.max_tokens = c.max_tokens, asking.prompt_logprobs = top;
    const int64_t first = e.add(plain);
    while (!e.idle()) e.step();
    const int64_t hits = e.stats().prefix_hit_tokens;
    EXPECT_EQ(hits, 0);
    for (const std::vector<int32_t>& other : others) {
      Request r;
      r.prompt = other, r.max_tokens = 60;
      r.sampling = model::GenerateOptions::greedy();
      e.add(r);
    }
    const int64_t id = e.add(asking);  // the latest arrival: the one preempted in the small pool
    EXPECT_GT(id, first);
    std::vector<engine::StepOutput> got;
    while (!e.idle()) {
      for (engine::StepOutput& o : e.step()) {
        if (o.id == id) {
          got.push_back(std::move(o));
        } else {
          EXPECT_TRUE(o.prompt_logprobs.empty());  // not asked for
        }
      }
    }
    ASSERT_EQ(got.size(), 1u);
    const engine::StepOutput& o = got[0];
    EXPECT_TRUE(o.finished);
    EXPECT_EQ(o.finish_reason, "length");
    EXPECT_EQ(o.token, c.max_tokens == 0 ? -1 : next);
    ASSERT_EQ(o.prompt_logprobs.size(), size_t(P - 1));
    double sum = 0;
    for (size_t t = 0; t < want.size(); ++t) {
      // The CPU backend's rows are the same bits in any batch: the same logprobs exactly.
      EXPECT_EQ(o.prompt_logprobs[t], want[t]) << "place " << t;
      sum += o.prompt_logprobs[t].logprob;
    }
    EXPECT_NEAR(sum, want_sum, 1e-4 * std::abs(want_sum));
    if (c.pool < 2048) {
      EXPECT_GT(e.stats().preemptions, 0);
    } else {
      // The prompt's cached pages were not used (in the small pool, the preempted others'
      // recomputations find theirs).
      EXPECT_EQ(e.stats().prefix_hit_tokens, hits) << "a prompt-logprobs request computes its prompt";
    }
    EXPECT_EQ(e.blocks().total_references(), 0);
  }

  alone.release(seq);
  Engine e(alone);
  Request r;
  r.prompt = {1, 2, 3}, r.max_tokens = 0;
  test::expect_throw<InputError>([&] { e.add(r); }, {"max_tokens", "prompt_logprobs"});
  r.prompt_logprobs = 21;
  test::expect_throw<InputError>([&] { e.add(r); }, {"prompt_logprobs", "20"});
  // A one-token prompt has no prompt logprob to give.
  r.prompt = {5}, r.prompt_logprobs = 0;
  e.add(r);
  std::vector<engine::StepOutput> out;
  while (!e.idle()) {
    for (engine::StepOutput& o : e.step()) out.push_back(std::move(o));
  }
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].finished);
  EXPECT_EQ(out[0].token, -1);
  EXPECT_TRUE(out[0].prompt_logprobs.empty());
}

// logit_bias (OpenAI's): +100 on a token makes greedy decoding choose it every step; −100 on
// the greedy choice bans it (the next best is chosen; its logprob stays the raw one); ids
// outside the vocabulary and biases past ±100 are refused.
TEST(Engine, LogitBiasForcesAndBansTokens) {
  const LoadedModel loaded = load(Checkpoints::of("qwen2", "f16"));
  const int64_t vocab = loaded.config.vocab;
  const std::vector<int32_t> prompt = random_prompt(21, vocab, 8);
  Model alone(loaded, engine_model());
  Sequence seq;
  const std::vector<float> last = alone.extend(seq, prompt);
  const int32_t greedy = int32_t(cpu::argmax(last.data(), vocab));
  std::vector<float> without = last;
  without[size_t(greedy)] = -INFINITY;
  const int32_t second = int32_t(cpu::argmax(without.data(), vocab));
  alone.release(seq);
  const int32_t forced = int32_t((greedy + 7) % vocab);

  Engine e(alone, {.max_num_batched_tokens = 16});
  auto run = [&](std::vector<std::pair<int32_t, float>> bias) {
    Request r;
    r.prompt = prompt, r.max_tokens = 5;
    r.sampling = model::GenerateOptions::greedy();
    r.sampling.logit_bias = std::move(bias);
    r.sampling.logprobs = 1;
    e.add(r);
    std::vector<engine::StepOutput> out;
    while (!e.idle()) {
      for (engine::StepOutput& o : e.step()) out.push_back(std::move(o));
    }
    return out;
  };
  const std::vector<engine::StepOutput> pushed = run({{forced, 100.f}});
  ASSERT_EQ(pushed.size(), 5u);
  for (const engine::StepOutput& o : pushed) EXPECT_EQ(o.token, forced);
  const std::vector<engine::StepOutput> banned = run({{greedy, -100.f}, {forced, 0.f}});
  ASSERT_FALSE(banned.empty());
  EXPECT_EQ(banned[0].token, second);
  EXPECT_LT(banned[0].logprob, banned[0].top_logprobs[0].second) << "the raw logprob, not the biased one";
  EXPECT_EQ(banned[0].top_logprobs[0].first, greedy);

  Request r;
  r.prompt = prompt;
  r.sampling.logit_bias = {{int32_t(vocab), 1.f}};
  test::expect_throw<InputError>([&] { e.add(r); }, {"logit_bias", "outside the vocabulary"});
  r.sampling.logit_bias = {{3, 100.5f}};
  test::expect_throw<InputError>([&] { e.add(r); }, {"logit_bias", "[−100, 100]"});
  r.sampling.logit_bias = {{3, 1.f}, {3, 2.f}};
  test::expect_throw<InputError>([&] { e.add(r); }, {"logit_bias", "twice"});
  test::expect_throw<InputError>([&] { cpu::row_params(r.sampling, 0, 1); }, {"logit_bias"});
}

// Constrained requests beside a free one: every finished reply is valid under the schema, a
// greedy one takes at each step the best token the grammar allows (checked on the model's own
// logits), and the free request's tokens are those it gets alone.
TEST(Engine, GrammarConstrainedRequestsFollowTheirSchema) {
  const std::string dir = Checkpoints::get("--arch llama --format f16 --tokenizer");
  const LoadedModel loaded = load(dir);
  const int64_t vocab = loaded.config.vocab;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_hf_directory(dir);
  auto words = std::make_shared<const engine::TokenVocabulary>(tok.token_bytes(), vocab);
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "n": {"type": "integer"}, "ok": {"type": "boolean"},
      "tag": {"enum": ["a", "b"]}}, "required": ["name", "n", "ok", "tag"]})");
  auto automaton = std::make_shared<engine::GrammarAutomaton>(engine::json_schema_grammar(schema), words);
  const std::vector<int32_t> stops = model::eos_token_ids(dir);
  ASSERT_FALSE(stops.empty());
  const std::vector<int32_t> prompt = tok.encode("Reply in JSON:", false);
  // Free requests beside them, greedy and sampled: the backend picks their rows (argmax, its
  // sampler) in the same steps as the host samples the constrained ones (Engine::step's mixed steps).
  cpu::SamplingParams seeded;
  seeded.seed = 11, seeded.top_k = 30;
  const std::vector<Job> free_jobs{{random_prompt(19, vocab, 3), 12}, {random_prompt(9, vocab, 4), 16, seeded}};
  const std::vector<std::vector<int32_t>> free_alone = alone(loaded, free_jobs);

  Model m(loaded, engine_model());
  Engine e(m, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  std::map<int64_t, std::string> kind;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = prompt, r.max_tokens = 200, r.stop_ids = stops;
    r.sampling = i == 0 ? model::GenerateOptions::greedy() : cpu::SamplingParams{};
    r.sampling.seed = uint64_t(i);
    if (i == 2) r.sampling.top_p = 0.8f, r.sampling.top_k = 20;
    if (i == 3) r.sampling.logprobs = 2;
    r.constraint = std::make_shared<engine::GrammarConstraint>(automaton, stops);
    kind[e.add(r)] = i == 0 ? "greedy" : "sampled";
  }
  std::map<int64_t, size_t> free_index;
  for (size_t i = 0; i < free_jobs.size(); ++i) {
    Request r;
    r.prompt = free_jobs[i].prompt, r.max_tokens = free_jobs[i].max_tokens, r.sampling = free_jobs[i].sampling;
    const int64_t id = e.add(r);
    kind[id] = "free", free_index[id] = i;
  }
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, std::string> reason;
  while (!e.idle()) {
    for (const engine::StepOutput& o : e.step()) {
      out[o.id].push_back(o.token);
      if (o.finished) reason[o.id] = o.finish_reason;
    }
  }
  int whole = 0, greedy_checked = 0;
  for (const auto& [id, tokens] : out) {
    if (kind[id] == "free") {
      EXPECT_EQ(tokens, free_alone[free_index[id]]);
      continue;
    }
    std::vector<int32_t> text_ids = tokens;
    if (!text_ids.empty() && std::count(stops.begin(), stops.end(), text_ids.back())) text_ids.pop_back();
    const std::string text = tok.decode(text_ids);
    const int32_t at = automaton->step(automaton->start(), text);
    ASSERT_NE(at, engine::GrammarAutomaton::kDead) << text;
    if (kind[id] == "greedy") {
      // Each token the argmax of the logits over what the grammar allowed there.
      Model ref(loaded, engine_model());
      Sequence seq;
      std::vector<float> logits = ref.extend(seq, prompt);
      engine::GrammarConstraint c(automaton, stops);
      for (int32_t t : tokens) {
        const engine::TokenMask& allowed = c.allowed();
        int32_t best = -1;
        for (int32_t v = 0; v < vocab; ++v) {
          if (engine::mask_has(allowed, v) && (best < 0 || logits[size_t(v)] > logits[size_t(best)])) best = v;
        }
        ASSERT_EQ(t, best);
        c.accept(t);
        logits = ref.extend(seq, std::span(&t, 1));
      }
      ++greedy_checked;
    }
    if (reason[id] != "stop") continue;
    ++whole;
    const nlohmann::json j = nlohmann::json::parse(text);
    EXPECT_TRUE(j["name"].is_string() && j["name"].get<std::string>().size() <= 6) << text;
    EXPECT_TRUE(j["n"].is_number_integer()) << text;
    EXPECT_TRUE(j["ok"].is_boolean()) << text;
    EXPECT_TRUE(j["tag"] == "a" || j["tag"] == "b") << text;
    EXPECT_EQ(j.size(), 4u) << text;
  }
  EXPECT_EQ(greedy_checked, 1);
  EXPECT_GE(whole, 5) << "the constrained replies end within 200 tokens";
  EXPECT_GT(e.stats().device_sampled_steps, 0) << "mixed steps: the sampled free request's row on the backend";
  EXPECT_EQ(e.blocks().total_references(), 0);
  // A grammar over another vocabulary is refused.
  Request r;
  r.prompt = prompt;
  r.constraint = std::make_shared<engine::GrammarConstraint>(
      std::make_shared<engine::GrammarAutomaton>(
          engine::json_object_grammar(), std::make_shared<const engine::TokenVocabulary>(tok.token_bytes(), vocab + 1)),
      stops);
  test::expect_throw<InputError>([&] { e.add(r); }, {"grammar", "vocabulary"});
}

// A request constrained by `pattern` (which dead-ends: the tiny vocabulary has no 'é') beside a
// free one, run to the end on `options`: the constrained reply's text, its finish reason and the
// tokens drafted. The free request must give what it gives alone, and every page come back.
struct DeadEnd {
  std::string text, reason;
  int64_t drafted = 0;
};

DeadEnd run_dead_end(const std::string& dir, const LoadedModel& loaded, const std::string& pattern,
                     const std::string& prompt, const cpu::SamplingParams& sampling, const EngineOptions& options) {
  const int64_t vocab = loaded.config.vocab;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_hf_directory(dir);
  auto words = std::make_shared<const engine::TokenVocabulary>(tok.token_bytes(), vocab);
  auto automaton = std::make_shared<engine::GrammarAutomaton>(engine::regex_grammar(pattern), words);
  const std::vector<Job> free_jobs{{random_prompt(9, vocab, 5), 6}};
  const std::vector<std::vector<int32_t>> free_alone = alone(loaded, free_jobs);
  Model m(loaded, engine_model());
  Engine e(m, options);
  Request constrained;
  constrained.prompt = tok.encode(prompt, false), constrained.max_tokens = 8, constrained.sampling = sampling;
  constrained.constraint = std::make_shared<engine::GrammarConstraint>(automaton, model::eos_token_ids(dir));
  const int64_t constrained_id = e.add(constrained);
  Request free;
  free.prompt = free_jobs[0].prompt, free.max_tokens = free_jobs[0].max_tokens, free.sampling = free_jobs[0].sampling;
  const int64_t free_id = e.add(free);
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, std::string> reason;
  for (int guard = 0; !e.idle(); ++guard) {
    if (guard >= 1000) {
      ADD_FAILURE() << "the engine does not finish";
      break;
    }
    for (const engine::StepOutput& o : e.step()) {
      out[o.id].push_back(o.token);
      if (o.finished) reason[o.id] = o.finish_reason;
    }
  }
  EXPECT_EQ(out[free_id], free_alone[0]);
  EXPECT_EQ(reason[free_id], "length");
  EXPECT_EQ(e.blocks().total_references(), 0);
  return {tok.decode(out[constrained_id]), reason[constrained_id], e.stats().draft_tokens};
}

// A grammar that asks for a character no token holds dead-ends after "x": that request ends
// there ("length"), and the free request in the same steps is not failed with it (the sampler
// used to throw on the empty mask, failing the whole step).
TEST(Engine, AGrammarTheVocabularyCannotFinishEndsOnlyItsRequest) {
  const std::string dir = Checkpoints::get("--arch llama --format f16 --tokenizer");
  const DeadEnd d =
      run_dead_end(dir, load(dir), "x\u00e9y", "Say x:", {}, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  EXPECT_EQ(d.text, "x");
  EXPECT_EQ(d.reason, "length");
}

// Proposes the same tokens for every request, every step.
class FixedDrafter final : public engine::Drafter {
 public:
  explicit FixedDrafter(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  std::vector<engine::Draft> propose(std::span<const engine::DraftRequest> requests) override {
    std::vector<engine::Draft> out;
    for (const engine::DraftRequest& r : requests) {
      out.push_back({{tokens_.begin(), tokens_.begin() + std::min<int64_t>(r.k, int64_t(tokens_.size()))}, {}});
    }
    return out;
  }

 private:
  std::vector<int32_t> tokens_;
};

// The same dead end reached by a draft: "a" then a drafted "x" that the grammar allows but after
// which no token continues it. The reply ends after "x" with length, greedy or sampled (top-p,
// top-k, min-p), and the free request beside it (drafting too) keeps its output. draft() cuts
// such a draft; before it did, the row after "x" was verified with every token masked and its
// token thrown away when "x" ended the reply, which this test cannot tell apart.
TEST(Engine, ADraftIntoAGrammarsDeadEndIsNotVerified) {
  const std::string dir = Checkpoints::get("--arch llama --format f16 --tokenizer");
  const LoadedModel loaded = load(dir);
  const std::vector<int32_t> x = tokenizer::Tokenizer::from_hf_directory(dir).encode("x", false);
  ASSERT_EQ(x.size(), 1u);
  for (const bool sampled : {false, true}) {
    cpu::SamplingParams sampling;
    sampling.temperature = sampled ? 1.0f : 0.0f, sampling.seed = 7;
    if (sampled) sampling.top_p = 0.9f, sampling.top_k = 20, sampling.min_p = 0.01f;
    const DeadEnd d = run_dead_end(dir, loaded, "ax\u00e9y", "Say ax:", sampling,
                                   {.max_num_batched_tokens = 64,
                                    .max_num_seqs = 8,
                                    .num_speculative_tokens = 2,
                                    .drafter = std::make_shared<FixedDrafter>(std::vector<int32_t>{x[0], x[0]})});
    EXPECT_GT(d.drafted, 0);
    EXPECT_EQ(d.text, "ax") << "sampled " << sampled;
    EXPECT_EQ(d.reason, "length");
  }
}

// Speculation on constrained requests: drafts the grammar refuses are cut, the rest verified
// under the masks, so a greedy constrained output is the one without speculation (n-gram and
// self-drafting, k = 1, 3, 5), self-drafts are accepted, and sampled ones end valid.
TEST(Engine, GrammarConstrainedRequestsSpeculateAndKeepTheirOutputs) {
  const std::string dir = Checkpoints::get("--arch llama --format f16 --tokenizer");
  const LoadedModel loaded = load(dir);
  const int64_t vocab = loaded.config.vocab;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_hf_directory(dir);
  auto words = std::make_shared<const engine::TokenVocabulary>(tok.token_bytes(), vocab);
  auto automaton = std::make_shared<engine::GrammarAutomaton>(
      engine::json_schema_grammar(nlohmann::ordered_json::parse(R"({"type": "array", "items": {"type": "object",
          "properties": {"k": {"enum": ["aa", "bb"]}, "v": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["k", "v"]}, "minItems": 2, "maxItems": 6})")),
      words);
  const std::vector<int32_t> stops = model::eos_token_ids(dir);
  const std::vector<std::vector<int32_t>> prompts{tok.encode("[{\"k\": \"aa\", \"v\": 1}, {\"k\":", false),
                                                  tok.encode("list:", false), random_prompt(13, vocab, 21)};
  auto run = [&](const EngineOptions& options, bool sampled) {
    Model m(loaded, engine_model());
    Engine e(m, options);
    std::map<int64_t, size_t> which;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.prompt = prompts[i], r.max_tokens = 120, r.stop_ids = stops;
      r.sampling = sampled ? cpu::SamplingParams{.temperature = 0.9f, .seed = 7 + i} : model::GenerateOptions::greedy();
      r.constraint = std::make_shared<engine::GrammarConstraint>(automaton, stops);
      which[e.add(r)] = i;
    }
    std::vector<std::vector<int32_t>> out(prompts.size());
    while (!e.idle()) {
      for (const engine::StepOutput& o : e.step()) out[which.at(o.id)].push_back(o.token);
    }
    return std::make_pair(out, e.stats());
  };
  const EngineOptions plain{.max_num_batched_tokens = 48, .max_num_seqs = 6};
  const auto [want, plain_stats] = run(plain, false);
  for (int k : {1, 3, 5}) {
    for (const std::string& drafter : {std::string("ngram"), "draft:" + dir}) {
      EngineOptions o = plain;
      o.num_speculative_tokens = k, o.speculative = drafter;
      const auto [got, stats] = run(o, false);
      EXPECT_EQ(got, want) << drafter << " k=" << k;
      if (drafter != "ngram") {
        EXPECT_GT(stats.accepted_tokens, 0) << "k=" << k;
      }
    }
  }
  EngineOptions o = plain;
  o.num_speculative_tokens = 3, o.speculative = "draft:" + dir;
  const auto [sampled, stats] = run(o, true);
  EXPECT_GT(stats.draft_tokens, 0);
  for (const std::vector<int32_t>& tokens : sampled) {
    std::vector<int32_t> text = tokens;
    if (!text.empty() && std::count(stops.begin(), stops.end(), text.back())) text.pop_back();
    EXPECT_NE(automaton->step(automaton->start(), tok.decode(text)), engine::GrammarAutomaton::kDead);
  }
}

TEST(Engine, CancelLetsThePagesGoAndStopIdsEndRequests) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  Model m(loaded, engine_model());
  Engine e(m);
  Request a, b;
  a.sampling = b.sampling = model::GenerateOptions::greedy();
  a.prompt = random_prompt(40, vocab, 1), a.max_tokens = 50;
  b.prompt = random_prompt(20, vocab, 2), b.max_tokens = 50;
  const int64_t ia = e.add(a), ib = e.add(b);
  e.step(), e.step(), e.step();
  EXPECT_GT(e.blocks().total_references(), 0);
  EXPECT_TRUE(e.cancel(ia));
  EXPECT_FALSE(e.cancel(ia));
  EXPECT_FALSE(e.cancel(12345));
  const std::vector<engine::StepOutput> out = e.step();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].id, ia);
  EXPECT_TRUE(out[0].finished);
  EXPECT_EQ(out[0].finish_reason, "cancelled");
  EXPECT_TRUE(e.cancel(ib));
  e.step();
  EXPECT_TRUE(e.idle());
  EXPECT_EQ(e.blocks().total_references(), 0);

  // A stop id ends a request when generated, and is its last token: the first token of a
  // sampled run that did not occur before it.
  const cpu::SamplingParams sampled{.temperature = 1.f, .seed = 5};
  const std::vector<int32_t> free_run = alone(loaded, {{a.prompt, 12, sampled}})[0];
  size_t first_new = 1;
  while (first_new < free_run.size() &&
         std::find(free_run.begin(), free_run.begin() + std::ptrdiff_t(first_new), free_run[first_new]) !=
             free_run.begin() + std::ptrdiff_t(first_new)) {
    ++first_new;
  }
  ASSERT_LT(first_new, free_run.size()) << "the sampled run repeats one token";
  Request s = a;
  s.max_tokens = 12;
  s.sampling = sampled;
  s.stop_ids = {free_run[first_new]};
  const int64_t is = e.add(s);
  std::vector<int32_t> got;
  std::string reason;
  while (!e.idle()) {
    for (const engine::StepOutput& o : e.step()) {
      ASSERT_EQ(o.id, is);
      got.push_back(o.token);
      if (o.finished) reason = o.finish_reason;
    }
  }
  EXPECT_EQ(reason, "stop");
  EXPECT_EQ(got, std::vector<int32_t>(free_run.begin(), free_run.begin() + std::ptrdiff_t(first_new) + 1));
}

TEST(Engine, RefusalsAreOneSentence) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  Model m(loaded, engine_model(256));
  test::expect_throw<InputError>([&] { Engine(m, {.max_num_batched_tokens = 65}); }, {"max_num_batched_tokens", "64"});
  test::expect_throw<InputError>([&] { Engine(m, {.max_num_seqs = 9}); }, {"max_num_seqs", "8"});
  Engine e(m);
  auto refused = [&](Request r, std::initializer_list<std::string_view> needles) {
    test::expect_throw<InputError>([&] { e.add(r); }, needles);
  };
  Request r;
  refused(r, {"no tokens"});
  r.prompt = {1, 2, 3};
  r.max_tokens = 0;
  refused(r, {"max_tokens"});
  r.max_tokens = 4;
  r.prompt = {1, int32_t(loaded.config.vocab)};
  refused(r, {"outside the vocabulary"});
  r.prompt = random_prompt(250, loaded.config.vocab, 3);
  r.max_tokens = 10;
  refused(r, {"256 tokens"});
  r.prompt = {1};
  r.sampling.top_p = 2;
  refused(r, {"top_p"});
  EXPECT_TRUE(e.idle());

  // max_model_len: the model's positions at most; a request past it is refused, one at it runs.
  ModelOptions o = engine_model(256);
  o.max_model_len = loaded.config.max_position_embeddings + 1;
  test::expect_throw<InputError>([&] { Model(loaded, o); }, {"max_model_len", "max_position_embeddings"});
  o.max_model_len = 40;
  Model short_model(loaded, o);
  EXPECT_EQ(short_model.max_model_len(), 40);
  EXPECT_EQ(m.max_model_len(), loaded.config.max_position_embeddings);
  Engine short_engine(short_model);
  Request at_limit;
  at_limit.prompt = random_prompt(30, loaded.config.vocab, 4);
  at_limit.max_tokens = 12;
  test::expect_throw<InputError>([&] { short_engine.add(at_limit); }, {"max_model_len 40", "30 tokens"});
  at_limit.max_tokens = 11;
  EXPECT_EQ(together(short_engine, {{at_limit.prompt, 11}}).at(0).size(), 11u);
}

// onecat throughput: every request runs to output_len; the figures are there and consistent.
TEST(EngineCli, ThroughputReportsEveryRequest) {
  const std::string dir = Checkpoints::of("llama", "fp8");
  test::TempDir scratch;
  test::CommandResult r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                                                " --num-prompts 7 --input-len 33 --output-len 9 --max-num-seqs 3 "
                                                "--max-num-batched-tokens 40 --json",
                                            scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = test::parse_json(r);
  EXPECT_EQ(j["num_prompts"], 7);
  EXPECT_EQ(j["preemptions"], 0);
  const double seconds = j["seconds"].get<double>();
  EXPECT_GT(seconds, 0);
  EXPECT_NEAR(j["output_tokens_per_second"].get<double>(), 7 * 9 / seconds, 1e-6 * 63 / seconds);
  EXPECT_NEAR(j["requests_per_second"].get<double>(), 7 / seconds, 1e-6 * 7 / seconds);
  EXPECT_LE(j["ttft"]["p50_ms"].get<double>(), j["ttft"]["p99_ms"].get<double>());
  EXPECT_GT(j["tpot"]["p50_ms"].get<double>(), 0);
  // 7 prompts of 33 tokens at 40 tokens and 3 sequences per step take at least 7·33/40 steps.
  EXPECT_GE(j["steps"].get<int64_t>(), 7 * 33 / 40 + 8);
  // Decode-only steps: at least the last request's 8 after every prompt is in; never a first
  // token; at most 3 tokens each; their rate is their tokens over their seconds.
  const nlohmann::json& decode = j["decode"];
  EXPECT_GE(decode["steps"].get<int64_t>(), 8);
  EXPECT_LE(decode["tokens"].get<int64_t>(), 7 * 8);
  EXPECT_LE(decode["tokens"].get<int64_t>(), 3 * decode["steps"].get<int64_t>());
  EXPECT_GE(decode["tokens"].get<int64_t>(), decode["steps"].get<int64_t>());
  const double decode_rate = decode["tokens"].get<double>() / decode["seconds"].get<double>();
  EXPECT_NEAR(decode["tokens_per_second"].get<double>(), decode_rate, 1e-9 * decode_rate);
  EXPECT_LE(decode["seconds"].get<double>(), seconds);
  EXPECT_EQ(decode["host_share"], 0.0);  // cuda only
  EXPECT_EQ(j["cuda_graphs"]["sizes"], 0);
  EXPECT_EQ(j["device_sampling"], true);  // the default; --no-device-sampling turns it off
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-prompts 2 --input-len 9 --output-len 3 --no-device-sampling --json",
                        scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::parse_json(r)["device_sampling"], false);
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-prompts 2 --input-len 9 --output-len 3 --kv-cache-dtype fp8 --json",
                        scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::parse_json(r)["kv_cache_dtype"], "fp8");
  EXPECT_EQ(test::parse_json(r)["output_tokens"], 6);
  for (const char* bad : {"--num-prompts 0", "--max-num-seqs 0", "--device tpu", "--kv-cache-dtype fp4", "--profile"}) {
    r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir + " " + bad, scratch.path());
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_TRUE(test::contains(r.err, "onecat: error: ")) << bad << ": " << r.err;
  }
}

// --speculative and --num-draft-tokens (--num-speculative-tokens its other name): the drafter's
// figures; the checkpoint as its own draft accepts every greedy draft.
TEST(EngineCli, ThroughputSpeculates) {
  const std::string dir = Checkpoints::of("llama", "fp8");
  test::TempDir scratch;
  test::CommandResult r = test::run_command(
      std::string(ONECAT_BIN) + " throughput --model " + dir +
          " --num-prompts 3 --input-len 20 --output-len 12 --speculative draft:" + dir + " --num-draft-tokens 3 --json",
      scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = test::parse_json(r);
  EXPECT_EQ(j["output_tokens"], 36);
  const nlohmann::json& s = j["speculative"];
  EXPECT_EQ(s["drafter"], "draft:" + dir);
  EXPECT_EQ(s["num_draft_tokens"], 3);
  EXPECT_GT(s["draft_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(s["acceptance_rate"].get<double>(), 1.0);
  EXPECT_EQ(s["acceptance_rate_at"], (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_GT(s["mean_acceptance_length"].get<double>(), 1.0);
  EXPECT_LE(s["mean_acceptance_length"].get<double>(), 4.0);
  // Every draft accepted: a verifying step gives 4 tokens, so well under one step per token.
  EXPECT_LT(s["target_steps_per_output_token"].get<double>(), 0.6);
  EXPECT_GT(s["target_steps_per_output_token"].get<double>(), 0.25);
  // --draft-p-min 1: no draft of a random model is that sure; 2 is one sentence.
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-prompts 3 --input-len 20 --output-len 12 --speculative draft:" + dir +
                            " --num-draft-tokens 3 --draft-p-min 1 --json",
                        scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::parse_json(r)["speculative"]["draft_tokens"], 0);
  EXPECT_EQ(test::parse_json(r)["speculative"]["draft_p_min"], 1.0);
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir + " --speculative draft:" + dir +
                            " --num-draft-tokens 3 --draft-p-min 2",
                        scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "--draft-p-min")) << r.err;
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-prompts 2 --input-len 20 --output-len 6 --num-speculative-tokens 2 --json",
                        scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  j = test::parse_json(r);
  EXPECT_EQ(j["speculative"]["drafter"], "ngram");
  EXPECT_EQ(j["speculative"]["drafted_at"].size(), 2u);
  // The n-gram drafter's match lengths: a shortest longer than the longest is one sentence.
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-prompts 2 --input-len 20 --output-len 6 --num-speculative-tokens 2"
                            " --prompt-lookup-min 2 --prompt-lookup-max 3 --json",
                        scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::parse_json(r)["output_tokens"], 12);
  EXPECT_EQ(test::parse_json(r)["speculative"]["ngram"], (std::vector<int>{2, 3}));
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-speculative-tokens 2 --prompt-lookup-min 3 --prompt-lookup-max 2",
                        scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "--prompt-lookup-min")) << r.err;
  r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir +
                            " --num-draft-tokens 2 --speculative " + "draft:" + (scratch / "nowhere"),
                        scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
}

// onecat audit: the gates pass with either drafter — greedy identity over the built-in prompts,
// perplexity one token a step against verify-sized chunks, natural stops — as a table and as
// JSON; bad input is one sentence.
// onecat step-cost: a row per (batch, k), each step timed, the ratio theirs. Bad lists are one
// sentence and exit 2.
TEST(EngineCli, StepCostTimesVerifyAgainstDecode) {
  const std::string dir = Checkpoints::of("qwen3", "awq4");
  test::TempDir scratch;
  test::CommandResult r = test::run_command(std::string(ONECAT_BIN) + " step-cost --model " + dir +
                                                " --batches 1,3 --drafts 2,5 --context 40 --steps 3 --json",
                                            scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = test::parse_json(r);
  EXPECT_EQ(j["context"], 40);
  ASSERT_EQ(j["rows"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json& row = j["rows"][i];
    EXPECT_EQ(row["batch"], i < 2 ? 1 : 3);
    EXPECT_EQ(row["k"], i % 2 == 0 ? 2 : 5);
    EXPECT_GT(row["decode_ms"].get<double>(), 0);
    EXPECT_GT(row["verify_ms"].get<double>(), 0);
    EXPECT_NEAR(row["ratio"].get<double>(), row["verify_ms"].get<double>() / row["decode_ms"].get<double>(), 1e-9);
  }
  r = test::run_command(std::string(ONECAT_BIN) + " step-cost --model " + dir + " --drafts 17", scratch.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--drafts takes numbers from 1 to 16"), std::string::npos) << r.err;
}

TEST(EngineCli, AuditPassesItsGates) {
  const std::string dir = Checkpoints::get("--arch llama --format f16 --tokenizer");
  test::TempDir scratch;
  test::write_file(scratch / "text.txt",
                   "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age "
                   "of foolishness, it was the epoch of belief, it was the epoch of incredulity.");
  const std::string audit = std::string(ONECAT_BIN) + " audit --model " + dir +
                            " --device cpu --max-tokens 12 --text " + (scratch / "text.txt") + " ";
  test::CommandResult r =
      test::run_command(audit + "--speculative draft:" + dir + " --num-draft-tokens 3 --json", scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = test::parse_json(r);
  EXPECT_EQ(j["pass"], true);
  EXPECT_EQ(j["identity"]["identical"], j["prompts"]);
  EXPECT_GE(j["prompts"].get<int>(), 8);
  EXPECT_TRUE(j["identity"]["first_divergence"].is_null());
  EXPECT_GT(j["perplexity"]["tokens"].get<int>(), 100);
  EXPECT_LE(j["perplexity"]["relative_difference"].get<double>(), 1e-4);
  EXPECT_GT(j["perplexity"]["target"].get<double>(), 1.0);
  EXPECT_EQ(j["stops"]["target"], j["stops"]["speculative"]);
  EXPECT_EQ(j["acceptance"]["acceptance_rate"].get<double>(), 1.0);  // its own draft
  EXPECT_LT(j["acceptance"]["target_steps"]["speculative"].get<int64_t>(),
            j["acceptance"]["target_steps"]["target"].get<int64_t>());
  // --against default: the CPU backend has no configs, so its default run is the target's.
  r = test::run_command(audit + "--against default --json", scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  j = test::parse_json(r);
  EXPECT_EQ(j["against"]["default"]["identical"], j["prompts"]);
  EXPECT_EQ(j["against"]["default"]["divergences"], 0);
  EXPECT_EQ(j["against"]["default"]["pass"], true);
  r = test::run_command(audit + "--against default", scratch.path());  // n-gram drafts, the table
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* want : {"greedy identity", "perplexity", "natural stops", "tuned vs default", "PASS"}) {
    EXPECT_TRUE(test::contains(r.out, want)) << r.out;
  }
  EXPECT_FALSE(test::contains(r.out, "FAIL")) << r.out;
  test::write_file(scratch / "prompts.jsonl", "{\"prompt_ids\": [1, 2, 3]}\n{\"text\": 1}\n");
  r = test::run_command(std::string(ONECAT_BIN) + " audit --model " + dir + " --prompts " + (scratch / "prompts.jsonl"),
                        scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "line 2 must be a JSON object")) << r.err;
  r = test::run_command(std::string(ONECAT_BIN) + " audit --model " + Checkpoints::of("llama", "f16") + " --text " +
                            (scratch / "text.txt"),
                        scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "needs the checkpoint's tokenizer.json")) << r.err;
  r = test::run_command(audit + "--against cpu", scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(
      test::contains(r.err, "--against cpu compares the GPU with the CPU backend: it needs a GPU (--device cuda)"))
      << r.err;
  r = test::run_command(audit + "--against default,gpu", scratch.path());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "--against takes default and cpu (comma-separated), not \"gpu\"")) << r.err;
}

// engine::compare_greedy (audit's gate 4): identical outputs; a target token the variant ranks
// last at that place is a divergence (its gap the whole spread), a near tie only under a tie
// bound of the whole spread; an output that ends early never is.
TEST(Engine, GreedyAbJudgesEachFirstDivergence) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  const int64_t vocab = loaded.config.vocab;
  Model m(loaded, options(256));
  std::vector<std::vector<int32_t>> prompts, greedy;
  for (uint32_t i = 0; i < 3; ++i) {
    prompts.push_back(random_prompt(9 + 4 * i, vocab, 80 + i));
    Sequence s;
    std::vector<int32_t> out{m.extend_greedy(s, prompts.back())};
    while (out.size() < 6) out.push_back(m.extend_greedy(s, std::span(&out.back(), 1)));
    m.release(s);
    greedy.push_back(out);
  }
  engine::GreedyAb ab = engine::compare_greedy(m, prompts, greedy, greedy, 2e-3);
  EXPECT_EQ(ab.identical, 3);
  EXPECT_TRUE(ab.pass());
  EXPECT_FALSE(ab.first.has_value());

  std::vector<std::vector<int32_t>> target = greedy;
  std::vector<int32_t> prefix = prompts[1];
  prefix.insert(prefix.end(), greedy[1].begin(), greedy[1].begin() + 2);
  Sequence s;
  const std::vector<float> l = m.extend(s, prefix);
  m.release(s);
  target[1][2] = int32_t(std::min_element(l.begin(), l.end()) - l.begin());
  target[2].pop_back();
  ab = engine::compare_greedy(m, prompts, target, greedy, 2e-3);
  EXPECT_EQ(ab.identical, 1);
  EXPECT_EQ(ab.divergences, 2);
  EXPECT_FALSE(ab.pass());
  ASSERT_TRUE(ab.first.has_value());
  EXPECT_EQ(ab.first->prompt, 1u);
  EXPECT_EQ(ab.first->position, 2u);
  EXPECT_EQ(ab.first->target, target[1][2]);
  EXPECT_EQ(ab.first->variant, greedy[1][2]);
  EXPECT_NEAR(ab.first->gap, 1.0, 1e-6);
  ab = engine::compare_greedy(m, prompts, target, greedy, 1.0);
  EXPECT_EQ(ab.near_ties, 1);
  EXPECT_EQ(ab.divergences, 1);  // prompt 2's target ended early
  EXPECT_EQ(m.pages().free_pages(), m.pages().pages());
}

// --dataset and --wave: the requests of a JSONL file one after another; a repeated prompt's
// pages come from the prefix cache; a bad line is refused with its number.
TEST(EngineCli, ThroughputRunsADatasetInWaves) {
  const std::string dir = Checkpoints::of("llama", "fp8");
  test::TempDir scratch;
  std::string ids;
  for (int i = 0; i < 40; ++i) ids += (i ? "," : "") + std::to_string((i * 7 + 3) % 60);
  test::write_file(scratch / "requests.jsonl", "{\"prompt_ids\": [" + ids + "], \"max_tokens\": 5}\n\n" +
                                                   "{\"prompt_ids\": [" + ids + "], \"max_tokens\": 3}\n" +
                                                   "{\"prompt_ids\": [9, 8, 7]}\n");
  test::CommandResult r = test::run_command(std::string(ONECAT_BIN) + " throughput --model " + dir + " --dataset " +
                                                (scratch / "requests.jsonl") + " --wave 1 --output-len 4 --json",
                                            scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = test::parse_json(r);
  EXPECT_EQ(j["num_prompts"], 3);
  EXPECT_EQ(j["wave"], 1);
  EXPECT_EQ(j["prompt_tokens"], 83);
  EXPECT_EQ(j["output_tokens"], 5 + 3 + 4);
  EXPECT_EQ(j["ttft_ms_by_request"].size(), 3u);
  // The second request finds the first's full pages (16 tokens each) of the same 40-token prompt.
  EXPECT_EQ(j["prefix_hit_tokens"].get<int64_t>() % 16, 0);
  EXPECT_GE(j["prefix_hit_tokens"].get<int64_t>(), 16);
  EXPECT_GT(j["itl"]["p50_ms"].get<double>(), 0);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"prompt_ids\": [1, 2]}\n[1, 2]\n", "line 2 is not a JSON object"},
      {"{\"prompt_ids\": [1, 99999]}\n", "not an id in [0,"},
      {"{\"prompt_ids\": [1], \"prompt\": \"hi\"}\n", "exactly one of"},
      {"{\"prompt_ids\": [1], \"max_tokens\": 0}\n", "max_tokens must be"},
      {"{\"prompt\": \"hi\"}\n", "no tokenizer.json"},
      {"\n", "holds no requests"},
  };
  for (const auto& [text, want] : bad) {
    test::write_file(scratch / "bad.jsonl", text);
    r = test::run_command(
        std::string(ONECAT_BIN) + " throughput --model " + dir + " --dataset " + (scratch / "bad.jsonl"),
        scratch.path());
    EXPECT_EQ(r.status, 2) << text << ": " << r.err;
    EXPECT_TRUE(test::contains(r.err, want)) << text << ": " << r.err;
  }
}

}  // namespace
}  // namespace onecat
