// The sampling family's kernel bodies (templates/sampling) run on the CPU through
// tests/sampling_emulator.h, against runtime/cpu/sampling: the selections' shared-memory
// path and their multi-pass path (a small list capacity forces it), ties split by id, the
// history hash table, the top-n logprobs, the sampled frequencies, and the split argmax.
// The GPU runs the same bodies (tests/gpu_sampling_test.cpp); this proves their logic here.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/sampling_emulator.h"
// clang-format off: the emulator must come first
#include "sampling/argmax.cuh"
#include "sampling/sample.cuh"
// clang-format on
#include "codegen/sampling/config.h"
#include "codegen/sampling/row_params.h"
#include "tuner/sampling_batch.h"

namespace onecat {
namespace {

// The kernel's row struct and the host's are one layout.
static_assert(sizeof(sampling::KernelRowParams) == sizeof(sampling::RowParams));
static_assert(offsetof(sampling::KernelRowParams, top_k) == offsetof(sampling::RowParams, top_k));
static_assert(offsetof(sampling::KernelRowParams, seed) == offsetof(sampling::RowParams, seed));
static_assert(offsetof(sampling::KernelRowParams, step) == offsetof(sampling::RowParams, step));
static_assert(offsetof(sampling::KernelRowParams, prompt_length) == offsetof(sampling::RowParams, prompt_length));

constexpr unsigned char kGarbage = 0xa5;

// Runs the sample body over the batch with THREADS emulated threads and a CAP-entry list.
template <int VOCAB, int LOGPROBS, int THREADS, int CAP>
SamplingOutput run_sample(const SamplingBatch& b) {
  using Row = sampling::SampleRow<VOCAB, LOGPROBS, THREADS, CAP>;
  const sampling::Spec spec{sampling::Op::kSample, VOCAB, LOGPROBS};
  sampling::Config config;
  config.threads = THREADS;
  config.cap = CAP;
  const size_t shared = size_t(config.shared_bytes(spec));
  EXPECT_GE(shared, size_t(Row::kSharedBytes) + 4 * Row::kWords);
  std::vector<uint64_t> smem((shared + 7) / 8);
  const std::vector<sampling::RowParams> rp = b.row_params();
  std::vector<int> table(std::max<size_t>(4 * b.ids.size(), 1));
  SamplingOutput out;
  out.width = LOGPROBS;
  out.tokens.assign(size_t(b.rows), -7);
  out.token_logprobs.assign(size_t(b.rows), std::nanf(""));
  out.top_ids.assign(size_t(b.rows) * LOGPROBS, -7);
  out.top_logprobs.assign(size_t(b.rows) * LOGPROBS, std::nanf(""));
  emulated::run_grid(
      unsigned(b.rows), 1, THREADS,
      [&] {
        std::memset(smem.data(), kGarbage, smem.size() * 8);
        std::memset(table.data(), kGarbage, table.size() * 4);
      },
      [&] {
        sampling::sample_body<VOCAB, LOGPROBS, THREADS, CAP>(
            out.tokens.data(), out.token_logprobs.data(), LOGPROBS ? out.top_ids.data() : nullptr,
            LOGPROBS ? out.top_logprobs.data() : nullptr, b.logits.data(),
            reinterpret_cast<const sampling::KernelRowParams*>(rp.data()), b.offsets.data(), b.ids.data(), table.data(),
            reinterpret_cast<unsigned char*>(smem.data()));
      });
  return out;
}

template <int VOCAB, int LOGPROBS, int THREADS, int CAP>
void expect_matches_reference(int64_t rows, uint64_t seed) {
  SCOPED_TRACE("vocab " + std::to_string(VOCAB) + " threads " + std::to_string(THREADS) + " cap " +
               std::to_string(CAP));
  const SamplingBatch b = make_sampling_batch(VOCAB, rows, LOGPROBS, seed);
  const SamplingVerdict v = compare_sampling(b, run_sample<VOCAB, LOGPROBS, THREADS, CAP>(b));
  EXPECT_TRUE(v.detail.empty()) << v.detail;
  EXPECT_LE(v.near_boundary, rows / 50 + 1);
  EXPECT_LT(v.logprob_error, kSamplingLogprobTolerance);
}

// Few emulated threads keep the emulation quick (each __syncthreads is a barrier of OS
// threads); the bodies take any power of two.
TEST(SamplingKernel, SharedMemoryPathMatchesTheReference) {
  expect_matches_reference<997, 20, 16, 1024>(96, 11);
  expect_matches_reference<2001, 20, 64, 1024>(16, 17);
}

TEST(SamplingKernel, MultiPassPathMatchesTheReference) {
  // A 32-entry list: most selections take the radix passes and the ordered tie pass.
  expect_matches_reference<997, 20, 16, 32>(96, 12);
  expect_matches_reference<4099, 7, 32, 64>(40, 13);
}

TEST(SamplingKernel, TinyAndOddVocabularies) {
  expect_matches_reference<1, 1, 16, 32>(24, 14);
  expect_matches_reference<5, 3, 16, 32>(48, 15);
  expect_matches_reference<33, 0, 16, 64>(48, 16);
}

TEST(SamplingKernel, SampledFrequenciesFollowTheDefinition) {
  // Eight tokens, one setting, 600 seeds: chi-square against the reference's probabilities
  // (the exact definition, in fp64), and the same tokens as the reference row by row.
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.5f, -1.0f, 1.7f, 0.9f, -0.2f};
  cpu::SamplingParams p{.temperature = 0.8f, .top_k = 6, .top_p = 0.95f, .min_p = 0.05f};
  const SamplingBatch b = make_repeated_batch(logits, p, 600, 21);
  const SamplingOutput out = run_sample<8, 0, 16, 32>(b);
  EXPECT_TRUE(compare_sampling(b, out).detail.empty());
  // Expected probabilities: the reference's weights over its kept set.
  std::vector<double> w(8);
  const float top = *std::max_element(logits.begin(), logits.end());
  for (int i = 0; i < 8; ++i) w[size_t(i)] = std::exp((double(logits[size_t(i)]) - top) / p.temperature);
  std::vector<int> order = {1, 3, 5, 0, 6, 2, 7, 4};  // value descending, ties by id
  double mass = 0;
  for (int j = 0; j < p.top_k; ++j) mass += w[size_t(order[size_t(j)])] >= p.min_p ? w[size_t(order[size_t(j)])] : 0;
  std::vector<double> expected(8, 0);
  double cum = 0;
  for (int j = 0; j < p.top_k && cum < p.top_p * mass; ++j) {
    const int id = order[size_t(j)];
    if (w[size_t(id)] < p.min_p) break;
    expected[size_t(id)] = w[size_t(id)];
    cum += w[size_t(id)];
  }
  std::vector<int> counts(8);
  for (int t : out.tokens) ++counts[size_t(t)];
  double chi2 = 0;
  int df = -1;
  for (int i = 0; i < 8; ++i) {
    if (expected[size_t(i)] == 0) {
      EXPECT_EQ(counts[size_t(i)], 0) << i;
      continue;
    }
    const double e = expected[size_t(i)] / cum * double(b.rows);
    chi2 += (counts[size_t(i)] - e) * (counts[size_t(i)] - e) / e;
    ++df;
  }
  ASSERT_GE(df, 2);
  EXPECT_LT(chi2, 24.3);  // the 0.001 quantile for ≤ 7 degrees of freedom is at most 24.3
}

// The penalty's division without a division instruction (common.cuh divide_rn) equals IEEE
// division on random and extreme operands, with the emulator's approximate reciprocal 2 ulp off.
TEST(SamplingKernel, DivisionIsExactlyIeee) {
  std::mt19937_64 rng(5);
  std::vector<std::pair<float, float>> cases = {{1, 3},          {FLT_MAX, 0.5f}, {FLT_MAX, 1e-30f},
                                                {1e-30f, 1e30f}, {1e-45f, 3},     {7, 1e-45f},
                                                {3, 1.0000001f}, {0.1f, 0.3f},    {123.456f, 1.1f}};
  for (int i = 0; i < 200000; ++i) {
    const float a = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), int(rng() % 200) - 100);
    const float b = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), int(rng() % 200) - 100);
    cases.emplace_back(a, b);
    cases.emplace_back(float(rng() % 1000) / 8, float(rng() % 64 + 1) / 16);
  }
  for (const auto& [a, b] : cases) {
    const float want = a / b, got = sampling::divide_rn(a, b);
    ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << a << " / " << b << " = " << want << ", got " << got;
  }
}

template <int VOCAB, int THREADS, int VEC, int UNROLL, int SPLIT>
void expect_argmax(int64_t rows, uint64_t seed) {
  SCOPED_TRACE("vocab " + std::to_string(VOCAB) + " vec " + std::to_string(VEC) + " split " + std::to_string(SPLIT));
  const std::vector<float> logits = make_argmax_logits(VOCAB, rows, seed);
  std::vector<int> tokens(size_t(rows), -7);
  std::vector<uint64_t> partials(size_t(rows) * SPLIT, 0x5a5a5a5a5a5a5a5aull);
  std::vector<unsigned> counters(size_t(rows), 0);
  std::vector<uint64_t> smem((8 * THREADS + 16) / 8);
  for (int launch = 0; launch < 2; ++launch) {  // the counters must be back at 0
    emulated::run_grid(
        unsigned(rows), SPLIT, THREADS, [&] { std::memset(smem.data(), kGarbage, smem.size() * 8); },
        [&] {
          sampling::argmax_body<VOCAB, THREADS, VEC, UNROLL, SPLIT>(
              tokens.data(), logits.data(), reinterpret_cast<unsigned long long*>(partials.data()), counters.data(),
              *reinterpret_cast<sampling::ArgmaxShared<THREADS>*>(smem.data()));
        });
    EXPECT_EQ(compare_argmax(logits, VOCAB, tokens), "");
    for (unsigned c : counters) EXPECT_EQ(c, 0u);
    if (SPLIT > 1) {
      for (uint64_t p : partials) EXPECT_EQ(p, 0u);  // the whole workspace is left zero
    }
  }
}

// One argmax launch in a shared workspace laid out as sampling::make_call lays it out:
// partials [rows][SPLIT] first, then the counters.
template <int VOCAB, int SPLIT>
void argmax_in_workspace(const std::vector<float>& logits, int64_t rows, std::vector<uint64_t>& workspace) {
  constexpr int kThreads = 16;
  std::vector<int> tokens(size_t(rows), -7);
  auto* partials = reinterpret_cast<unsigned long long*>(workspace.data());
  auto* counters = reinterpret_cast<unsigned*>(workspace.data() + rows * SPLIT);
  std::vector<uint64_t> smem((8 * kThreads + 16) / 8);
  emulated::run_grid(
      unsigned(rows), SPLIT, kThreads, [&] { std::memset(smem.data(), kGarbage, smem.size() * 8); },
      [&] {
        sampling::argmax_body<VOCAB, kThreads, 1, 2, SPLIT>(
            tokens.data(), logits.data(), partials, counters,
            *reinterpret_cast<sampling::ArgmaxShared<kThreads>*>(smem.data()));
      });
  EXPECT_EQ(compare_argmax(std::vector<float>(logits.begin(), logits.begin() + rows * VOCAB), VOCAB, tokens), "");
}

// A workspace zeroed once serves launches of other row counts and splits (the engine and the
// Python binding size it for their largest launch and pass it to every launch): each launch's
// counters lie where an earlier launch's partials were.
TEST(SamplingKernel, ArgmaxWorkspaceServesOtherRowCountsAndSplits) {
  constexpr int kVocab = 3001;
  const std::vector<float> logits = make_argmax_logits(kVocab, 10, 36);
  std::vector<uint64_t> workspace(10 * 4 + 10, 0);
  argmax_in_workspace<kVocab, 4>(logits, 10, workspace);
  argmax_in_workspace<kVocab, 3>(logits, 7, workspace);
  argmax_in_workspace<kVocab, 4>(logits, 2, workspace);
  argmax_in_workspace<kVocab, 2>(logits, 10, workspace);
  for (uint64_t w : workspace) EXPECT_EQ(w, 0u);
}

TEST(SamplingKernel, ArgmaxMatchesTheReference) {
  expect_argmax<1001, 16, 1, 2, 1>(10, 31);
  expect_argmax<1000, 32, 4, 4, 1>(10, 32);
  expect_argmax<4001, 16, 1, 2, 4>(10, 33);
  expect_argmax<4000, 16, 4, 1, 3>(10, 34);
  expect_argmax<1, 16, 1, 1, 1>(5, 35);
}

}  // namespace
}  // namespace onecat
