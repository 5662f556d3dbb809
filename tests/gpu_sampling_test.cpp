// The sampling family on the GPU against runtime/cpu/sampling (tuner/verify_sampling: tokens
// exact or within 1e-4 of a sampling boundary, logprobs within 1e-4, top ids exact, two
// launches bit-identical, guard rows untouched), every candidate config, the sampled
// frequencies of a small vocabulary (chi-square), and launches through a PreparedOp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "cache/store.h"
#include "codegen/family.h"
#include "codegen/sampling/op.h"
#include "runtime/cpu/sampling.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/prepared_op.h"
#include "runtime/jit/module_table.h"
#include "runtime/jit/service.h"
#include "tuner/sampling_batch.h"
#include "tuner/tuner.h"
#include "tuner/verify.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

Arch gpu_arch() { return Arch{Driver::find()->device_info(0).sm}; }

struct SamplingGpu : ::testing::Test {
  void SetUp() override {
    char tmpl[] = "/tmp/onecat-gpu-XXXXXX";
    dir = mkdtemp(tmpl);
    store = std::make_unique<Store>(dir + "/kernels.sqlite");
    jit = std::make_unique<JitService>(store.get());
  }
  const LoadedKernel& load(const std::string& spec, const std::string& config) {
    CompileResult c = jit->get(CompileRequest::make(family_of(spec), spec, config, gpu_arch()));
    return ModuleTable::get().load(c.binary);
  }
  CheckResult run(const std::string& spec, const std::string& config, int64_t rows) {
    return check_kernel(family_of(spec), spec, config, load(spec, config), rows);
  }
  std::string dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<JitService> jit;
};

std::string describe(const CheckResult& r) {
  return "seed=" + std::to_string(r.seed) + " err=" + std::to_string(r.error) + " " + r.detail;
}

TEST_F(SamplingGpu, DefaultConfigsManyVocabularies) {
  for (int vocab : {151936, 128256, 262144, 32000, 50021, 1000, 7, 1}) {
    for (int logprobs : {0, 20}) {
      const std::string spec = "sampling:op=sample,vocab=" + std::to_string(vocab) +
                               ",logprobs=" + std::to_string(std::min(logprobs, vocab));
      for (int64_t rows : {1, 7, 64}) {
        const std::string config = family_of(spec).default_config(spec, rows, gpu_arch());
        CheckResult r = run(spec, config, rows);
        EXPECT_TRUE(r.passed) << spec << " [" << config << "] rows=" << rows << " " << describe(r);
      }
    }
    const std::string argmax = "sampling:op=argmax,vocab=" + std::to_string(vocab);
    for (int64_t rows : {1, 5, 300}) {
      const std::string config = family_of(argmax).default_config(argmax, rows, gpu_arch());
      CheckResult r = run(argmax, config, rows);
      EXPECT_TRUE(r.passed) << argmax << " [" << config << "] rows=" << rows << " " << describe(r);
    }
  }
}

TEST_F(SamplingGpu, EveryCandidateConfig) {
  for (const char* spec : {"sampling:op=sample,vocab=151936,logprobs=20", "sampling:op=argmax,vocab=151936",
                           "sampling:op=argmax,vocab=50021"}) {
    for (const std::string& config : family_of(spec).candidate_configs(spec, gpu_arch())) {
      CheckResult r = run(spec, config, 33);
      EXPECT_TRUE(r.passed) << spec << " [" << config << "] " << describe(r);
    }
  }
}

TEST_F(SamplingGpu, WrongKernelIsCaught) {
  // A kernel built for another vocabulary must fail the check (the check is not vacuous).
  const std::string spec = "sampling:op=sample,vocab=1000,logprobs=5",
                    other = "sampling:op=sample,vocab=999,logprobs=5";
  const LoadedKernel& k = load(other, "threads=256,cap=512");
  EXPECT_FALSE(check_kernel(family_of(spec), spec, "threads=256,cap=512", k, 16).passed);
  const std::string a = "sampling:op=argmax,vocab=1000", b = "sampling:op=argmax,vocab=996";
  const LoadedKernel& ka = load(b, "threads=128,vec=4,unroll=2,split=1");
  EXPECT_FALSE(check_kernel(family_of(a), a, "threads=128,vec=4,unroll=2,split=1", ka, 16).passed);
}

// Rows of one 8-token distribution with their own seeds: the token frequencies against the
// probabilities the definition gives (the reference's, in fp64).
TEST_F(SamplingGpu, SampledFrequenciesFollowTheDefinition) {
  const std::string spec = "sampling:op=sample,vocab=8,logprobs=0";
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.5f, -1.0f, 1.7f, 0.9f, -0.2f};
  const cpu::SamplingParams p{.temperature = 0.8f, .top_k = 6, .top_p = 0.95f, .min_p = 0.05f};
  constexpr int64_t kRows = 20000;
  const SamplingBatch b = make_repeated_batch(logits, p, kRows, 7);
  const std::vector<sampling::RowParams> rp = b.row_params();
  DeviceBuffer d_logits = DeviceBuffer::from_host(b.logits.data(), b.logits.size() * 4);
  DeviceBuffer d_params = DeviceBuffer::from_host(rp.data(), rp.size() * sizeof(rp[0]));
  DeviceBuffer d_tokens(size_t(kRows) * 4), d_logprobs(size_t(kRows) * 4);
  const std::string config = family_of(spec).default_config(spec, kRows, gpu_arch());
  sampling::Args a;
  a.tokens = d_tokens.ptr();
  a.token_logprobs = d_logprobs.ptr();
  a.logits = d_logits.ptr();
  a.params = d_params.ptr();
  a.rows = kRows;
  launch(
      load(spec, config),
      sampling::make_call(sampling::Spec::parse(spec), sampling::Config::parse(sampling::Spec::parse(spec), config), a),
      nullptr);
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "sampling frequencies");
  SamplingOutput out;
  out.tokens.resize(size_t(kRows));
  out.token_logprobs.resize(size_t(kRows));
  d_tokens.download(out.tokens.data(), size_t(kRows) * 4);
  d_logprobs.download(out.token_logprobs.data(), size_t(kRows) * 4);
  const SamplingVerdict v = compare_sampling(b, out);
  EXPECT_TRUE(v.detail.empty()) << v.detail;
  // The definition's probabilities: weights exp((l - max)/T) over the kept prefix.
  std::vector<double> w(8);
  for (int i = 0; i < 8; ++i) w[size_t(i)] = std::exp((double(logits[size_t(i)]) - 2.5) / p.temperature);
  const int order[] = {1, 3, 5, 0, 6, 2, 7, 4};
  double mass = 0;
  for (int j = 0; j < p.top_k; ++j) mass += w[size_t(order[j])] >= p.min_p ? w[size_t(order[j])] : 0;
  std::vector<double> expected(8, 0);
  double cum = 0;
  for (int j = 0; j < p.top_k && cum < p.top_p * mass && w[size_t(order[j])] >= p.min_p; ++j) {
    expected[size_t(order[j])] = w[size_t(order[j])];
    cum += w[size_t(order[j])];
  }
  std::vector<int64_t> counts(8);
  for (int t : out.tokens) ++counts[size_t(std::clamp(t, 0, 7))];
  double chi2 = 0;
  for (int i = 0; i < 8; ++i) {
    if (expected[size_t(i)] == 0) {
      EXPECT_EQ(counts[size_t(i)], 0) << "token " << i << " is filtered out";
      continue;
    }
    const double e = expected[size_t(i)] / cum * double(kRows);
    chi2 += (double(counts[size_t(i)]) - e) * (double(counts[size_t(i)]) - e) / e;
  }
  EXPECT_LT(chi2, 24.3);  // the 0.001 quantile of chi-square for ≤ 7 degrees of freedom
}

// The tuner end to end on both ops (every candidate must check right), printing the times:
// argmax as bandwidth (the logits read once), sample per row.
TEST_F(SamplingGpu, TunesAndReportsTimes) {
  for (auto [spec, bucket] : {std::pair{"sampling:op=argmax,vocab=151936", int64_t(1)},
                              std::pair{"sampling:op=argmax,vocab=151936", int64_t(256)},
                              std::pair{"sampling:op=sample,vocab=151936,logprobs=20", int64_t(1)},
                              std::pair{"sampling:op=sample,vocab=151936,logprobs=20", int64_t(64)}}) {
    const Family& f = family_of(spec);
    const TuningRecord rec = tune_spec(f, f.canonical_spec(spec), bucket, *jit, 8);
    EXPECT_FALSE(rec.candidates.empty()) << spec;
    for (const auto& c : rec.candidates) EXPECT_NE(c.status, "wrong") << spec << " " << c.config << " " << c.detail;
    const double gbps = double(bucket) * 151936 * 4 / (rec.best_us * 1e-6) / 1e9;
    std::printf("%s rows=%lld: best %s %.1f us (%.0f GB/s of logits), default %.1f us\n", spec, (long long)bucket,
                rec.config.c_str(), rec.best_us, gbps, rec.default_us);
  }
  release_workloads();
}

// What the engine holds: PreparedOps of both ops, launched through the Session, against the
// CPU reference; the argmax workspace from workspace_bytes, zeroed once.
TEST(SamplingPreparedOp, BothOpsThroughTheSession) {
  Session& session = Session::get();
  session.use_gpu(0);
  constexpr int kVocab = 32003;
  PreparedOp<sampling::Spec, sampling::Config, sampling::Args> sample(session,
                                                                      "sampling:logprobs=4,vocab=32003,op=sample");
  PreparedOp<sampling::Spec, sampling::Config, sampling::ArgmaxArgs> argmax(session, "sampling:op=argmax,vocab=32003");
  EXPECT_EQ(sample.spec().to_string(), "sampling:op=sample,vocab=32003,logprobs=4");
  Driver& d = *Driver::find();
  for (int64_t rows : {1, 3, 40}) {
    SCOPED_TRACE(rows);
    const SamplingBatch b = make_sampling_batch(kVocab, rows, 4, uint64_t(rows) * 77);
    const std::vector<sampling::RowParams> rp = b.row_params();
    DeviceBuffer logits = DeviceBuffer::from_host(b.logits.data(), b.logits.size() * 4);
    DeviceBuffer params = DeviceBuffer::from_host(rp.data(), rp.size() * sizeof(rp[0]));
    DeviceBuffer offsets = DeviceBuffer::from_host(b.offsets.data(), b.offsets.size() * 4);
    DeviceBuffer ids = DeviceBuffer::from_host(b.ids.data(), b.ids.size() * 4);
    DeviceBuffer table(size_t(std::max<int64_t>(sampling::history_table_bytes(int64_t(b.ids.size())), 16)));
    DeviceBuffer tokens(size_t(rows) * 4), token_lp(size_t(rows) * 4), top_ids(size_t(rows) * 16),
        top_lp(size_t(rows) * 16);
    EXPECT_EQ(sample.workspace_bytes(rows), 0);
    sample.launch({tokens.ptr(), token_lp.ptr(), top_ids.ptr(), top_lp.ptr(), logits.ptr(), params.ptr(), offsets.ptr(),
                   ids.ptr(), table.ptr(), rows},
                  rows, nullptr);
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "a sampling PreparedOp launch");
    SamplingOutput out;
    out.width = 4;
    out.tokens.resize(size_t(rows));
    out.token_logprobs.resize(size_t(rows));
    out.top_ids.resize(size_t(rows) * 4);
    out.top_logprobs.resize(size_t(rows) * 4);
    tokens.download(out.tokens.data(), size_t(rows) * 4);
    token_lp.download(out.token_logprobs.data(), size_t(rows) * 4);
    top_ids.download(out.top_ids.data(), size_t(rows) * 16);
    top_lp.download(out.top_logprobs.data(), size_t(rows) * 16);
    const SamplingVerdict v = compare_sampling(b, out);
    EXPECT_TRUE(v.detail.empty()) << v.detail;

    DeviceBuffer workspace(size_t(std::max<int64_t>(argmax.workspace_bytes(rows), 16)));
    workspace.fill_bytes(0);
    argmax.launch({tokens.ptr(), logits.ptr(), workspace.ptr(), rows}, rows, nullptr);
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "an argmax PreparedOp launch");
    std::vector<int> greedy(static_cast<size_t>(rows));
    tokens.download(greedy.data(), size_t(rows) * 4);
    EXPECT_EQ(compare_argmax(b.logits, kVocab, greedy), "");
  }
}

}  // namespace
}  // namespace onecat
