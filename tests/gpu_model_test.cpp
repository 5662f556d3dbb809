// The GPU forward pass (models/model/gpu_backend) against the CPU one, which the golden tests
// hold to transformers: every tiny checkpoint of the CPU tests (all_model_cases: architecture ×
// format, RoPE scalings, a sliding window), one prefill, chunked prefill with decode steps
// (eager and as CUDA graphs), batches of several sequences, greedy decoding on the GPU and the
// profile; the same distance and bounds as the goldens (model_test_util.h). Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "model_test_util.h"
#include "models/model/generate.h"
#include "models/model/generation_config.h"
#include "models/model/gpu_backend.h"
#include "models/plan.h"
#include "models/tokenizer/tokenizer.h"
#include "runtime/cpu/sampling.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/session.h"
#include "tuner/sampling_batch.h"

namespace onecat {
namespace {

ModelOptions on_gpu(ModelOptions o, bool graphs) {
  o.device = model::Device::kCuda;
  o.cuda_graphs = graphs;
  return o;
}

// The bounds for an fp8 KV cache (GpuForward.Fp8KvCacheMatchesTheCpuForward says why).
constexpr double kFp8KvRelativeError = 0.03, kFp8KvKl = 0.01;

// Within the goldens' bounds, or the given ones.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab, const std::string& what,
                  double relative_error = kMaxRelativeError, double kl = kMaxKl) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (float v : got) ASSERT_TRUE(std::isfinite(v)) << what;
  const Distance d = distance(got.data(), want.data(), int64_t(want.size()) / vocab, vocab);
  EXPECT_TRUE(d.relative_error <= relative_error && d.kl <= kl) << what << ": " << d;
}

class GpuForward : public testing::TestWithParam<ModelCase> {};

TEST_P(GpuForward, MatchesTheCpuForward) {
  const LoadedModel loaded = load(Checkpoints::get(GetParam().args()));
  const int64_t vocab = loaded.config.vocab;
  const std::vector<int32_t> prompt = random_prompt(150, vocab, 11);
  Model cpu(loaded, options(256));
  const std::vector<float> want = logits_by_steps(cpu, prompt, {prompt.size()}, 0);

  Model gpu(loaded, on_gpu(options(256), false));
  expect_close(logits_by_steps(gpu, prompt, {prompt.size()}, 0), want, vocab, "one prefill");
  // Chunks ending inside and on page boundaries, then decode steps; max_batch_tokens 64 splits
  // the longest chunk, so several gemm and attention buckets run.
  Model chunked(loaded, on_gpu(options(64), false));
  expect_close(logits_by_steps(chunked, prompt, {1, 15, 16, 33, 100}, 30), want, vocab, "chunked + decode, eager");
  Model graphed(loaded, on_gpu(options(64), true));
  expect_close(logits_by_steps(graphed, prompt, {37}, 50), want, vocab, "chunked + decode, CUDA graphs");
  // The graphs replay with new data: a second sequence through the same graphs.
  const std::vector<int32_t> other = random_prompt(90, vocab, 12);
  const std::vector<float> other_want = logits_by_steps(cpu, other, {other.size()}, 0);
  expect_close(logits_by_steps(graphed, other, {20}, 60), other_want, vocab, "second sequence, CUDA graphs");
  // Pages of 7 tokens.
  Model odd_pages(loaded, on_gpu(options(256, 512, 7), true));
  expect_close(logits_by_steps(odd_pages, prompt, {64}, 20), want, vocab, "pages of 7");
}

INSTANTIATE_TEST_SUITE_P(Tiny, GpuForward, testing::ValuesIn(all_model_cases()), model_case_name);
// Qwen3-MoE through the moe family; awq4's checkpoint keeps one expert's down_proj in fp16, so
// that layer's down runs as two launches (slot tables).
// Random routers put some token's k-th and (k+1)-th experts within rounding of each other, and the
// GPU and CPU (fp16 sums in different orders) then choose differently and part (by 0.06 to 0.13
// of the logits' spread on the H200): these checkpoints make every choice decisive.
INSTANTIATE_TEST_SUITE_P(TinyMoe, GpuForward, testing::ValuesIn(moe_model_cases("--decisive-routing")),
                         model_case_name);

// Decodes and prefill chunks of several sequences in one step give each what it gets alone.
TEST(GpuForwardBatch, MixedStepsMatchSequencesAlone) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  const std::vector<int32_t> a = random_prompt(70, vocab, 1), b = random_prompt(45, vocab, 2);
  Model cpu(loaded, options(256));
  const std::vector<float> want_a = logits_by_steps(cpu, a, {a.size()}, 0);
  const std::vector<float> want_b = logits_by_steps(cpu, b, {b.size()}, 0);
  for (bool graphs : {false, true}) {
    Model gpu(loaded, on_gpu(options(128), graphs));
    Sequence sa, sb;
    std::vector<float> got_a = gpu.extend(sa, std::span(a).subspan(0, 40), true);
    std::vector<float> got_b;
    // a decodes while b prefills in chunks, then both decode together.
    for (size_t t = 40, at_b = 0; t < a.size(); ++t) {
      std::vector<Model::Chunk> chunks{{&sa, std::span(a).subspan(t, 1)}};
      const size_t n = at_b < 30 ? 10 : 1;
      if (at_b < b.size()) chunks.push_back({&sb, std::span(b).subspan(at_b, std::min(n, b.size() - at_b))});
      const std::vector<std::vector<float>> out = gpu.step(chunks);
      got_a.insert(got_a.end(), out[0].begin(), out[0].end());
      if (at_b < b.size()) {
        at_b += std::min(n, b.size() - at_b);
        if (at_b == b.size()) got_b = out[1];
      }
    }
    const std::string mode = graphs ? " (graphs)" : " (eager)";
    expect_close(got_a, want_a, vocab, "sequence a" + mode);
    expect_close(got_b, std::vector<float>(want_b.end() - vocab, want_b.end()), vocab, "b's last row" + mode);
    gpu.release(sa);
    gpu.release(sb);
  }
}

// Decode steps of 5 and then 3 sequences replay the graphs of 8 and 4 captured at start-up
// (Model::capture_graphs), padded with sequences on the scratch page: every real row follows
// the CPU forward of its sequence alone.
TEST(GpuGraphs, PaddedDecodeStepsFollowTheCpuForward) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  const size_t decodes = 16;
  Model cpu(loaded, options(256));
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> want;
  for (uint32_t i = 0; i < 5; ++i) {
    prompts.push_back(random_prompt(30 + 9 * i + decodes, vocab, 60 + i));
    const std::vector<float> all = logits_by_steps(cpu, prompts.back(), {64}, decodes);
    want.emplace_back(all.end() - std::ptrdiff_t(decodes * size_t(vocab)), all.end());
  }
  ModelOptions o = on_gpu(options(64), true);
  o.max_sequences = 8;
  Model gpu(loaded, o);
  const Model::GraphStats graphs = gpu.capture_graphs(8);
  EXPECT_EQ(graphs.sizes, 4);  // 1, 2, 4, 8
  EXPECT_GT(graphs.seconds, 0);
  std::vector<Sequence> seqs(5);
  std::vector<std::vector<float>> got(5);
  for (size_t i = 0; i < 5; ++i) gpu.extend(seqs[i], std::span(prompts[i]).subspan(0, prompts[i].size() - decodes));
  for (size_t t = 0; t < decodes; ++t) {
    const size_t n = t < decodes / 2 ? 5 : 3;
    std::vector<Model::Chunk> chunks;
    for (size_t i = 0; i < n; ++i) chunks.push_back({&seqs[i], std::span(prompts[i]).subspan(seqs[i].length, 1)});
    const std::vector<std::vector<float>> out = gpu.step(chunks);
    EXPECT_GT(gpu.last_step_gpu_seconds(), 0);
    for (size_t i = 0; i < n; ++i) got[i].insert(got[i].end(), out[i].begin(), out[i].end());
  }
  for (size_t i = 0; i < 5; ++i) {
    const size_t steps = i < 3 ? decodes : decodes / 2;
    expect_close(got[i], std::vector<float>(want[i].begin(), want[i].begin() + std::ptrdiff_t(steps * size_t(vocab))),
                 vocab, "sequence " + std::to_string(i));
    gpu.release(seqs[i]);
  }
  EXPECT_EQ(gpu.pages().free_pages(), gpu.pages().pages());
}

// Verify blocks on the GPU (Model::prepare_verify: the verify kernels of blocks of 2 to 4 tokens;
// a 5-token block goes through the prefill kernel) mixed with a decode and a prefill chunk, then
// alone (uniform steps: CUDA graphs, captured at start-up for blocks of 4, on first use for 3),
// follow the CPU forward of each prompt; eager and graphed, fp16 and fp8 KV caches.
TEST(GpuVerify, VerifyBlocksFollowTheCpuForward) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 5; ++i) prompts.push_back(random_prompt(48 + 5 * i, vocab, 70 + i));
  for (models::KvCacheDtype kv : {models::KvCacheDtype::kF16, models::KvCacheDtype::kE4m3}) {
    ModelOptions co = options(256);
    co.kv_cache_dtype = kv;
    Model cpu(loaded, co);
    std::vector<std::vector<float>> want;
    for (const auto& p : prompts) want.push_back(logits_by_steps(cpu, p, {p.size()}, 0));
    for (bool graphs : {false, true}) {
      const std::string what = std::string(models::kv_cache_dtype_name(kv)) + (graphs ? ", graphs" : ", eager");
      ModelOptions o = on_gpu(options(64), graphs);
      o.max_sequences = 8;
      o.kv_cache_dtype = kv;
      Model gpu(loaded, o);
      gpu.prepare_verify(4);
      const Model::GraphStats stats = gpu.capture_graphs(8);
      EXPECT_EQ(stats.sizes, graphs ? 8 : 0) << what;  // decode 1, 2, 4, 8; verify blocks of 4 at 1, 2, 4, 8
      const VerifyFlow f = verify_flow(gpu, prompts);
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::vector<float> ref = rows_at(want[i], f.positions[i], vocab);
        const bool fp8 = kv != models::KvCacheDtype::kF16;
        expect_close(f.logits[i], ref, vocab, what + ", sequence " + std::to_string(i),
                     fp8 ? kFp8KvRelativeError : kMaxRelativeError, fp8 ? kFp8KvKl : kMaxKl);
      }
      EXPECT_EQ(gpu.pages().free_pages(), gpu.pages().pages()) << what;
    }
  }
}

// Model::warm_up runs prefill steps of 16, 32, 64 … tokens up to the step limit on the scratch
// page: the forward after it (f16: cuBLAS from 17 tokens where it can run) still follows the CPU
// forward, and no page of the pool is taken.
TEST(GpuWarmUp, PrefillStepsOnPaddingLeaveTheForwardAlone) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "f16"));
  const int64_t vocab = loaded.config.vocab;
  const std::vector<int32_t> prompt = random_prompt(150, vocab, 33);
  Model cpu(loaded, options(96));
  Sequence sc;
  const std::vector<float> want = cpu.extend(sc, prompt);
  for (bool graphs : {false, true}) {
    Model gpu(loaded, on_gpu(options(96), graphs));
    const Model::WarmStats warm = gpu.warm_up(1000);
    EXPECT_EQ(warm.steps, 4) << "16, 32, 64 and the 96-token limit";
    EXPECT_GT(warm.seconds, 0);
    EXPECT_EQ(gpu.pages().free_pages(), gpu.pages().pages());
    Sequence sg;
    expect_close(gpu.extend(sg, prompt), want, vocab, graphs ? "after warm-up (graphs)" : "after warm-up (eager)");
    gpu.release(sg);
    EXPECT_EQ(gpu.pages().free_pages(), gpu.pages().pages());
  }
  // A pool of three pages bounds the steps (a sequence's block table holds at most the pool).
  Model small(loaded, on_gpu(options(96, 48), true));
  EXPECT_EQ(small.warm_up(1000).steps, 3) << "16, 32 and the pool's 48 tokens";
  Model cpu_only(loaded, options(96));
  EXPECT_EQ(cpu_only.warm_up(1000).steps, 0);  // the CPU backend loads nothing lazily
}

// Greedy on the GPU (the argmax kernel over the logits in place, as graphs and eagerly) picks
// what the argmax of the same model's logits picks, through chunked prefill and decode steps.
TEST(GpuGreedy, ArgmaxOnTheGpuIsTheLogitsArgmax) {
  for (const char* format : {"f16", "awq4"}) {
    const LoadedModel loaded = load(Checkpoints::of("qwen3", format));
    const int64_t vocab = loaded.config.vocab;
    const std::vector<int32_t> prompt = random_prompt(100, vocab, 21);
    for (bool graphs : {false, true}) {
      Model a(loaded, on_gpu(options(32), graphs)), b(loaded, on_gpu(options(32), graphs));
      Sequence sa, sb;
      std::vector<float> l = a.extend(sa, prompt);
      int32_t id = b.extend_greedy(sb, prompt);
      for (int step = 0; step < 30; ++step) {
        const int32_t want = cpu::argmax(l.data(), vocab);
        ASSERT_EQ(id, want) << format << (graphs ? " graphs" : " eager") << " step " << step;
        l = a.extend(sa, std::span(&want, 1));
        id = b.extend_greedy(sb, std::span(&want, 1));
      }
    }
  }
}

// An fp8 KV cache (--kv-cache-dtype): the GPU forward against the CPU forward on the same cache
// type, in one prefill, chunked with decode steps and as CUDA graphs; the pool holds half the
// bytes of an fp16 one. A dense and a MoE model, a quantised one, a sliding window, and the
// checkpoint's own scales (self_attn.k_scale / v_scale: the kernels read them per layer). The
// goldens' bound does not hold here: the GPU's K and V differ from the CPU's by fp16 rounding
// (other summation orders), and a value near an fp8 rounding boundary then takes the next code,
// a step of 2^-3 (e4m3) or 2^-2 (e5m2) of itself. Measured on the H200 (tree 22887e6 + this
// test): max |Δ|/spread up to 0.011 and KL up to 0.0036 (3 of the 16 comparisons within the
// goldens' bounds), against 0.019–0.048 between fp8 and fp16 caches on the CPU
// (ModelForward.Fp8KvCacheIsConsistentAndNearFp16). So the bounds are about 3× the measured, and the power check is
// that the GPU's logits are nearer the CPU's fp8 forward than its fp16 one: a GPU that read or wrote the cache in
// another format, or not in fp8 at all, fails that.
TEST(GpuForward, Fp8KvCacheMatchesTheCpuForward) {
  constexpr double kRelativeError = kFp8KvRelativeError, kKl = kFp8KvKl;
  for (const ModelCase& c :
       {ModelCase{"qwen3", "f16", ""}, ModelCase{"llama", "awq4", ""},
        ModelCase{"mistral", "f16", "--sliding-window 48"}, ModelCase{"qwen3moe", "f16", "--decisive-routing"},
        ModelCase{"qwen3", "f16", "--kv-scales 3"}}) {
    const LoadedModel loaded = load(Checkpoints::get(c.args()));
    const int64_t vocab = loaded.config.vocab;
    const std::vector<int32_t> prompt = random_prompt(150, vocab, 13);
    const int64_t rows = int64_t(prompt.size());
    Model cpu_f16(loaded, options(256));
    const std::vector<float> f16 = logits_by_steps(cpu_f16, prompt, {prompt.size()}, 0);
    for (models::KvCacheDtype dtype : {models::KvCacheDtype::kE4m3, models::KvCacheDtype::kE5m2}) {
      const std::string what = c.args() + " " + models::kv_cache_dtype_name(dtype);
      ModelOptions o = options(256);
      o.kv_cache_dtype = dtype;
      Model cpu(loaded, o);
      const std::vector<float> want = logits_by_steps(cpu, prompt, {prompt.size()}, 0);
      Model gpu(loaded, on_gpu(o, false));
      const std::vector<float> one = logits_by_steps(gpu, prompt, {prompt.size()}, 0);
      o.max_batch_tokens = 64;
      Model graphed(loaded, on_gpu(o, true));
      const std::vector<float> chunked = logits_by_steps(graphed, prompt, {1, 15, 33}, 50);
      for (const auto& [name, got] :
           {std::pair{"one prefill", &one}, std::pair{"chunked + decode, graphs", &chunked}}) {
        ASSERT_EQ(got->size(), want.size()) << what << " " << name;
        for (float v : *got) ASSERT_TRUE(std::isfinite(v)) << what << " " << name;
        const Distance d = distance(got->data(), want.data(), rows, vocab);
        EXPECT_LE(d.relative_error, kRelativeError) << what << " " << name << ": " << d;
        EXPECT_LE(d.kl, kKl) << what << " " << name << ": " << d;
        const Distance from_f16 = distance(got->data(), f16.data(), rows, vocab);
        EXPECT_LT(d.relative_error, from_f16.relative_error)
            << what << " " << name << ": nearer the fp16 cache's logits";
      }
      Model f16_pool(loaded, on_gpu(options(256), false));
      EXPECT_EQ(2 * gpu.gpu()->kv_cache_bytes(), f16_pool.gpu()->kv_cache_bytes()) << what;
    }
  }
}

// kv_cache_tokens 0: the pool fills the GPU's memory up to gpu_memory_utilization, after the
// weights and activations; the model runs on it as on a pool of a given size.
TEST(GpuKvPool, SizedFromFreeMemory) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "f16"));
  const std::vector<int32_t> prompt = random_prompt(70, loaded.config.vocab, 5);
  ModelOptions o = on_gpu(options(32), true);
  o.kv_cache_tokens = 0;
  o.gpu_memory_utilization = 0.05;  // a few GB of the device: well beyond the tiny model's weights
  size_t free_before = 0, total = 0;
  const Driver& d = Driver::require_gpu();
  Session::get().use_gpu(-1);
  d.check(d.cuMemGetInfo(&free_before, &total), "cuMemGetInfo", "the test");
  Model filled(loaded, o);
  const int64_t pages = filled.pages().pages();
  ASSERT_GT(pages, 1000);
  const model::GpuBackend& g = *filled.gpu();
  EXPECT_EQ(g.kv_pages(), pages);
  // The pool takes what the share leaves: within the reserve (512 MiB) and a page of it.
  const double allowed = 0.05 * double(total) - (double(total) - double(free_before));
  EXPECT_LE(double(g.kv_cache_bytes() + g.weight_bytes()), allowed);
  EXPECT_GE(double(g.kv_cache_bytes()), allowed - double(g.weight_bytes()) - double(size_t(1) << 30));
  Model sized(loaded, on_gpu(options(32), true));
  model::GenerateOptions greedy;
  greedy.sampling = model::GenerateOptions::greedy();
  greedy.max_tokens = 12;
  EXPECT_EQ(model::generate(filled, prompt, greedy).tokens, model::generate(sized, prompt, greedy).tokens);
}

// The engine on the GPU: twelve concurrent requests (chunked prefill mixed with decodes, CUDA
// graphs per decode batch size, and a small pool that forces preemption). The GPU's batches
// round differently from one request alone, so each generated token is checked against the CPU
// forward of the same prefix (teacher forcing): the CPU's argmax, or a token within the
// goldens' bound (2e-3 of the row's spread) of the CPU's best.
TEST(GpuEngine, ConcurrentRequestsFollowTheCpuForward) {
  const LoadedModel loaded = load(Checkpoints::of("mistral", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  for (int64_t pool : {2048, 160}) {
    ModelOptions o = on_gpu(options(64, pool), true);
    o.max_sequences = 8;
    Model gpu(loaded, o);
    engine::Engine e(gpu, {.max_num_batched_tokens = 48, .max_num_seqs = 6});
    std::map<int64_t, std::vector<int32_t>> prompts, got;
    for (int i = 0; i < 12; ++i) {
      engine::Request r;
      r.prompt = random_prompt(1 + (i * 37) % 100, vocab, 500 + uint32_t(i));
      r.max_tokens = 4 + (i * 7) % 23 + (pool < 2048 ? 20 : 0);
      r.sampling = model::GenerateOptions::greedy();
      prompts[e.add(r)] = r.prompt;
    }
    while (!e.idle()) {
      for (const engine::StepOutput& out : e.step()) got[out.id].push_back(out.token);
    }
    EXPECT_EQ(e.blocks().total_references(), 0);
    if (pool < 2048) {
      EXPECT_GT(e.stats().preemptions, 0);
    }
    Model cpu(loaded, options(256, 2048));
    for (const auto& [id, tokens] : got) {
      Sequence s;
      std::vector<float> l = cpu.extend(s, prompts[id]);
      for (size_t i = 0; i < tokens.size(); ++i) {
        const auto [lo, hi] = std::minmax_element(l.begin(), l.end());
        const float best = *hi, spread = *hi - *lo;
        EXPECT_LE(best - l[size_t(tokens[i])], 2e-3f * spread)
            << "request " << id << " token " << i << ": " << tokens[i] << " where the CPU picks " << (hi - l.begin())
            << " (pool " << pool << ")";
        l = cpu.extend(s, std::span(&tokens[i], 1));
      }
      cpu.release(s);
    }
  }
}

// Speculative decoding on the GPU (verify blocks through the verify kernels and, when the step
// holds them alone, CUDA graphs): n-gram drafts (k = 1, 4, 8) on prompts that repeat themselves
// and a draft model (the checkpoint itself, k = 3). Every greedy token is the CPU forward's choice (within 2e-3 of
// the logits' spread, the GPU's rounding), drafts are accepted, and self-drafting accepts nearly
// all: the draft's decode kernel and the target's verify kernel round differently, so a near tie
// may part them.
TEST(GpuEngine, SpeculativeGreedyFollowsTheCpuForward) {
  const std::string dir = Checkpoints::of("qwen3", "awq4");
  const LoadedModel loaded = load(dir);
  const int64_t vocab = loaded.config.vocab;
  Model cpu(loaded, options(256, 4096));
  const std::vector<std::pair<std::string, int>> runs{{"ngram", 1}, {"ngram", 4}, {"ngram", 8}, {"draft:" + dir, 3}};
  for (const auto& [speculative, k] : runs) {
    SCOPED_TRACE(speculative + ", k " + std::to_string(k));
    ModelOptions o = on_gpu(options(64, 4096), true);
    o.max_sequences = 8;
    Model gpu(loaded, o);
    engine::Engine e(
        gpu,
        {.max_num_batched_tokens = 64, .max_num_seqs = 6, .num_speculative_tokens = k, .speculative = speculative});
    std::map<int64_t, std::vector<int32_t>> prompts, got;
    for (int i = 0; i < 8; ++i) {
      engine::Request r;
      const std::vector<int32_t> block = random_prompt(6 + i, vocab, 900 + uint32_t(i));
      for (int rep = 0; rep < 4; ++rep) r.prompt.insert(r.prompt.end(), block.begin(), block.end());
      r.max_tokens = 24 + 5 * i;
      r.sampling = model::GenerateOptions::greedy();
      prompts[e.add(r)] = r.prompt;
    }
    while (!e.idle()) {
      for (const engine::StepOutput& out : e.step()) got[out.id].push_back(out.token);
    }
    EXPECT_EQ(e.blocks().total_references(), 0) << speculative;
    const engine::EngineStats& st = e.stats();
    EXPECT_GT(st.accepted_tokens, 0) << speculative;
    if (speculative != "ngram") {
      EXPECT_GE(double(st.accepted_tokens), 0.9 * double(st.draft_tokens)) << speculative;
    }
    for (const auto& [id, tokens] : got) {
      Sequence s;
      std::vector<float> l = cpu.extend(s, prompts[id]);
      for (size_t i = 0; i < tokens.size(); ++i) {
        const auto [lo, hi] = std::minmax_element(l.begin(), l.end());
        EXPECT_LE(*hi - l[size_t(tokens[i])], 2e-3f * (*hi - *lo))
            << speculative << ": request " << id << " token " << i << ": " << tokens[i] << " where the CPU picks "
            << (hi - l.begin());
        l = cpu.extend(s, std::span(&tokens[i], 1));
      }
      cpu.release(s);
    }
  }
}

// EngineOptions::device_sampling on the GPU: the sampling kernel over the logits in place picks
// what the fp64 host sampler picks from the same logits (a GPU Model replaying each request
// alone: the engine's steps for one request at a time are the same launches), as the kernel's
// own checks judge it (compare_sampling: a decision may differ only within
// kSamplingBoundaryMargin of its boundary, fp32 against fp64; logprobs within
// kSamplingLogprobTolerance). Temperature, top_k, top_p, min_p, penalties and logprobs. Eight
// at once (other kernels' configs, so other logits' bits): the same outputs twice.
TEST(GpuEngine, DeviceSamplingFollowsTheHostSampler) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  std::vector<cpu::SamplingParams> settings;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    settings.push_back({.temperature = i == 7 ? 0.f : 0.6f + 0.1f * float(i % 4),
                        .top_k = i % 3 == 0 ? 20 : 0,
                        .top_p = i % 2 ? 0.9f : 1.f,
                        .min_p = i == 4 ? 0.05f : 0.f,
                        .repetition_penalty = i % 4 == 1 ? 1.3f : 1.f,
                        .presence_penalty = i == 5 ? 0.5f : 0.f,
                        .frequency_penalty = i == 6 ? 0.4f : 0.f,
                        .seed = uint64_t(40 + i),
                        .logprobs = i % 3 == 2 ? 5 : 0});
    prompts.push_back(random_prompt(int64_t(5 + 7 * i), vocab, 900 + uint32_t(i)));
  }
  ModelOptions o = on_gpu(options(64, 4096), true);
  o.max_sequences = 8;
  Model gpu(loaded, o);
  // Every request's outputs, max_num_seqs at a time.
  auto run = [&](int together) {
    engine::Engine e(gpu, {.max_num_batched_tokens = 64, .max_num_seqs = together, .device_sampling = true});
    std::map<int64_t, size_t> which;
    std::vector<std::vector<engine::StepOutput>> got(settings.size());
    for (size_t i = 0; i < settings.size(); ++i) {
      engine::Request r;
      r.prompt = prompts[i], r.max_tokens = 24, r.sampling = settings[i];
      which[e.add(r)] = i;
    }
    while (!e.idle()) {
      for (engine::StepOutput& out : e.step()) got[which.at(out.id)].push_back(std::move(out));
    }
    EXPECT_GT(e.stats().device_sampled_steps, 0);
    EXPECT_EQ(e.stats().device_sampled_steps, e.stats().sampled_steps);
    return got;
  };
  const std::vector<std::vector<engine::StepOutput>> alone = run(1);
  Model replay(loaded, on_gpu(options(64, 4096), true));
  for (size_t i = 0; i < settings.size(); ++i) {
    const std::vector<engine::StepOutput>& outs = alone[i];
    ASSERT_EQ(outs.size(), 24u);
    // The request's steps as the rows of one batch (the replay's logits, its history so far),
    // judged as the kernel's own checks are (tuner/sampling_batch.h: the boundary margin, the
    // logprob tolerance, the top ids exactly).
    SamplingBatch b;
    b.vocab = int(vocab), b.rows = int64_t(outs.size());
    SamplingOutput got;
    got.width = settings[i].logprobs;
    Sequence s;
    std::vector<float> l = replay.extend(s, prompts[i]);
    std::vector<int> output;
    b.offsets.push_back(0);
    for (const engine::StepOutput& o : outs) {
      b.logits.insert(b.logits.end(), l.begin(), l.end());
      b.params.push_back(settings[i]);
      b.steps.push_back(output.size());
      b.prompt_lengths.push_back(int(prompts[i].size()));
      b.ids.insert(b.ids.end(), prompts[i].begin(), prompts[i].end());
      b.ids.insert(b.ids.end(), output.begin(), output.end());
      b.offsets.push_back(int(b.ids.size()));
      got.tokens.push_back(o.token);
      if (got.width > 0) got.token_logprobs.push_back(o.logprob);  // reported only with logprobs
      for (int k = 0; k < got.width; ++k) {
        const bool has = size_t(k) < o.top_logprobs.size();
        got.top_ids.push_back(has ? o.top_logprobs[size_t(k)].first : -1);
        got.top_logprobs.push_back(has ? o.top_logprobs[size_t(k)].second : -INFINITY);
      }
      output.push_back(o.token);
      l = replay.extend(s, std::span(&o.token, 1));
    }
    replay.release(s);
    EXPECT_EQ(compare_sampling(b, got).detail, "") << "request " << i;
  }
  const std::vector<std::vector<engine::StepOutput>> batched = run(8), again = run(8);
  for (size_t i = 0; i < settings.size(); ++i) {
    ASSERT_EQ(batched[i].size(), 24u);
    for (size_t t = 0; t < 24; ++t) {
      EXPECT_EQ(batched[i][t].token, again[i][t].token) << "request " << i << " token " << t;
      EXPECT_EQ(batched[i][t].top_logprobs, again[i][t].top_logprobs) << "request " << i << " token " << t;
    }
  }
}

// The profile times every launch of the steps it saw: the ops a decode step runs, once per layer
// (rmsnorm twice), their times positive, and the logits those steps gave the same as without it.
// Rows only the host sampler serves (a grammar's mask, a logit_bias) in the same steps as rows
// the GPU picks (the argmax kernel, the sampling kernel): Backend::read_logit_rows copies out the
// host rows alone. Against the same requests with every row copied out (device_sampling off):
// the same steps, so the same logits, and every output the same — the argmax kernel's is exact,
// and a sampled free request's kernel draw is compared only when it agrees with the host's.
TEST(GpuEngine, HostRowsBesideGpuRowsComeFromTheirOwnLogits) {
  const std::string dir = Checkpoints::get("--arch llama --format f16 --tokenizer");
  const LoadedModel loaded = load(dir);
  const int64_t vocab = loaded.config.vocab;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_hf_directory(dir);
  auto automaton = std::make_shared<engine::GrammarAutomaton>(
      engine::json_object_grammar(), std::make_shared<const engine::TokenVocabulary>(tok.token_bytes(), vocab));
  const std::vector<int32_t> stops = model::eos_token_ids(dir);
  ModelOptions o = on_gpu(options(64, 4096), true);
  o.max_sequences = 8;
  Model gpu(loaded, o);
  cpu::SamplingParams greedy{.temperature = 0}, sampled{.temperature = 0.8f, .seed = 5};
  auto run = [&](bool device_sampling, bool with_sampled_free) {
    engine::Engine e(gpu, {.max_num_batched_tokens = 64, .max_num_seqs = 8, .device_sampling = device_sampling});
    std::vector<std::vector<int32_t>> out(6);
    std::map<int64_t, size_t> which;
    for (size_t i = 0; i < out.size(); ++i) {
      engine::Request r;
      r.prompt = random_prompt(int64_t(4 + 5 * i), vocab, 70 + uint32_t(i)), r.max_tokens = 40, r.stop_ids = stops;
      r.sampling = i == 1 ? sampled : greedy;
      if (i < 2) r.constraint = std::make_shared<engine::GrammarConstraint>(automaton, stops);
      if (i == 2) r.sampling.logit_bias = {{int32_t(i + 30), -100.f}, {int32_t(i + 31), 4.f}};
      if (i == 5 && with_sampled_free) r.sampling = sampled;
      which[e.add(r)] = i;
    }
    while (!e.idle()) {
      for (const engine::StepOutput& s : e.step()) out[which.at(s.id)].push_back(s.token);
    }
    if (device_sampling) {
      EXPECT_GT(with_sampled_free ? e.stats().device_sampled_steps : e.stats().steps, 0);
    }
    return out;
  };
  EXPECT_EQ(run(true, false), run(false, false));
  const std::vector<std::vector<int32_t>> device = run(true, true), host = run(false, true);
  if (device[5] == host[5]) {
    EXPECT_EQ(device, host);
  }
  for (size_t i = 0; i < 2; ++i) {
    std::vector<int32_t> text = device[i];
    if (!text.empty() && std::count(stops.begin(), stops.end(), text.back())) text.pop_back();
    EXPECT_NE(automaton->step(automaton->start(), tok.decode(text)), engine::GrammarAutomaton::kDead);
  }
}

TEST(GpuProfile, TimesEveryLaunchOfTheSteps) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "f16"));
  const int64_t vocab = loaded.config.vocab, layers = loaded.config.layers;
  const std::vector<int32_t> prompt = random_prompt(40, vocab, 5);
  Model plain(loaded, on_gpu(options(64), true));
  const std::vector<float> want = logits_by_steps(plain, prompt, {40}, 10);
  ModelOptions o = on_gpu(options(64), true);
  o.profile = true;
  Model profiled(loaded, o);
  expect_close(logits_by_steps(profiled, prompt, {40}, 10), want, vocab, "profiled");
  Sequence greedy;  // ten greedy decode steps: the argmax launch is timed too
  int32_t id = profiled.extend_greedy(greedy, prompt);
  for (int i = 0; i < 10; ++i) id = profiled.extend_greedy(greedy, std::span(&id, 1));
  profiled.release(greedy);
  const model::GpuBackend::Profile p = profiled.gpu()->take_profile();
  EXPECT_EQ(p.decode_steps, 20);
  EXPECT_EQ(p.prefill_steps, 2);
  std::map<std::string, int64_t> decode_launches;
  for (const auto& op : p.ops) {
    EXPECT_GT(op.ms, 0) << op.op;
    if (op.decode) decode_launches[op.op] = op.launches;
  }
  // One-token decode steps fuse the norms where the GPU backend does (docs/models.md): a norm
  // inside qkv and gate_up, the residual adds inside o and down, the final norm alone.
  const bool fused = models::kGpuFusesNorms;
  std::map<std::string, int64_t> per_step = {{"embedding", 1},
                                             {"rmsnorm", 1},
                                             {"rope + kv write", layers},
                                             {"attention decode", layers},
                                             {"lm_head row gather", 1},
                                             {"gemm lm_head", 1},
                                             {"argmax", 1}};
  if (fused) {
    per_step.insert({{"rmsnorm + gemm qkv", layers},
                     {"gemm o + residual", layers},
                     {"rmsnorm + gemm gate_up", layers},
                     {"gemm down + residual", layers}});
  } else {
    per_step.insert({{"rmsnorm + residual", 2 * layers},
                     {"gemm qkv", layers},
                     {"gemm o", layers},
                     {"gemm gate_up", layers},
                     {"gemm down", layers}});
  }
  for (const auto& [op, n] : per_step) EXPECT_EQ(decode_launches[op], n * (op == "argmax" ? 10 : 20)) << op;
  EXPECT_EQ(decode_launches.size(), per_step.size());
  EXPECT_TRUE(profiled.gpu()->take_profile().ops.empty());  // taken: reset
}

// Every gemm of the model on gemm strategy=cublas, as a tune that found it fastest records it
// (f16 weights as they are; awq4 and nvfp4 dequantised into the scratch the layers share;
// silu_mul through the fp32 product), eagerly and from CUDA graphs: the forward follows the CPU
// one. Last in this file: it ends by recording the defaults back for the tests after it.
TEST(GpuForward, CublasGemmsFollowTheCpuForward) {
  if (!Cublas::find()) {
    if (const char* r = std::getenv("ONECAT_REQUIRE_GPU"); r && std::string(r) == "1")
      FAIL() << Cublas::unavailable_reason();
    GTEST_SKIP() << Cublas::unavailable_reason();
  }
  Session& session = Session::get();
  session.use_gpu(0);
  for (const char* fmt : {"f16", "awq4", "nvfp4"}) {
    const LoadedModel loaded = load(Checkpoints::of("qwen3", fmt));
    const int64_t vocab = loaded.config.vocab;
    std::vector<std::string> specs;
    // Not the decode steps' fused gemms (a norm or residual inside the gemv): no cuBLAS form.
    for (const std::string& spec :
         models::unique_specs(models::plan_model(loaded.config, 1, models::KvCacheDtype::kF16, 0))) {
      if (spec.starts_with("gemm:")) specs.push_back(spec);
    }
    ASSERT_GE(specs.size(), 4u) << fmt;
    auto record = [&](const std::string& config) {
      for (const std::string& spec : specs) {
        for (int64_t bucket = 1; bucket <= 256; bucket *= 2) {
          session.tune_and_record(spec, bucket, true, [&](const Family& f, const std::string& sp, int64_t b) {
            TuningRecord r;
            r.device = session.device(), r.family = std::string(f.name()), r.generator_version = f.generator_version();
            r.spec = f.canonical_spec(sp), r.bucket = b, r.default_config = f.default_config(sp, b, session.arch());
            r.config = config.empty() ? r.default_config : config;
            return r;
          });
        }
      }
    };
    record("strategy=cublas");
    const std::vector<int32_t> prompt = random_prompt(150, vocab, 14);
    Model cpu(loaded, options(256));
    const std::vector<float> want = logits_by_steps(cpu, prompt, {prompt.size()}, 0);
    Model gpu(loaded, on_gpu(options(256), false));
    EXPECT_GE(gpu.gpu()->kernels().tuned, int(specs.size())) << fmt << ": the gemms dispatch the recorded config";
    expect_close(logits_by_steps(gpu, prompt, {prompt.size()}, 0), want, vocab, std::string(fmt) + " one prefill");
    Model graphed(loaded, on_gpu(options(64), true));
    expect_close(logits_by_steps(graphed, prompt, {37}, 50), want, vocab,
                 std::string(fmt) + " chunked + decode, CUDA graphs");
    record("");
  }
}

}  // namespace
}  // namespace onecat
