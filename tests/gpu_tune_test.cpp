// The tuner end to end on the GPU: a few specs tuned, records stored with every candidate,
// a sabotaged (wrong) candidate rejected, and dispatch serving the tuned config.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <tuple>

#include "base/error.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/cuda/cublas.h"
#include "codegen/rmsnorm/op.h"
#include "runtime/engine/prepared_op.h"
#include "runtime/engine/session.h"
#include "runtime/engine/store_resolver.h"
#include "runtime/jit/service.h"
#include "tuner/bench.h"
#include "tuner/measure.h"
#include "tuner/tuner.h"
#include "tuner/workload.h"

namespace onecat {
namespace {

struct TuneGpu : ::testing::Test {
  void SetUp() override {
    char tmpl[] = "/tmp/onecat-tune-XXXXXX";
    store = std::make_unique<Store>(std::string(mkdtemp(tmpl)) + "/kernels.sqlite");
    jit = std::make_unique<JitService>(store.get());
  }
  std::unique_ptr<Store> store;
  std::unique_ptr<JitService> jit;
};

TEST_F(TuneGpu, TunesRecordsAndDispatches) {
  const DeviceFingerprint device = this_device();
  for (auto [spec, bucket] : {std::pair{"gemm:n=2048,k=1024,fmt=awq4", int64_t(1)},
                              std::pair{"gemm:n=2048,k=1024,fmt=fp8b128", int64_t(64)},
                              std::pair{"rmsnorm:hidden=4096,dtype=f16,residual=1", int64_t(16)}}) {
    const Family& f = family_of(spec);
    TuningRecord rec = tune_spec(f, f.canonical_spec(spec), bucket, *jit, 8);
    rec.key = tuning_key(device, rec.family, rec.generator_version, rec.spec, rec.bucket);
    EXPECT_GT(rec.candidates.size(), 1u) << spec;
    EXPECT_GT(rec.best_us, 0);
    EXPECT_GT(rec.default_us, 0);
    EXPECT_LE(rec.best_us, rec.default_us * 1.02 + 0.5) << "the choice is no slower than the default beyond noise";
    for (const auto& c : rec.candidates) EXPECT_NE(c.status, "wrong") << c.config << " " << c.detail;
    store->put_tuning(rec);
    ASSERT_TRUE(store->find_tuning(rec.key).has_value());

    Dispatcher d(store_resolver(*store, *jit, device));
    const int h = d.add_spec(rec.spec);
    const DispatchEntry& e = d.kernel_for(h, bucket);
    EXPECT_TRUE(e.tuned);
    EXPECT_EQ(e.config, rec.config);
    EXPECT_NE(e.kernel, nullptr);
    const DispatchEntry& other = d.kernel_for(h, bucket * 4);  // untuned bucket: the default
    EXPECT_FALSE(other.tuned);
    EXPECT_EQ(other.config, f.default_config(rec.spec, bucket * 4, Arch{device.sm}));
  }
}

TEST_F(TuneGpu, AWrongCandidateIsRecordedAndNeverChosen) {
  const std::string spec = family_of("gemm:n=1024,k=1024,fmt=nvfp4").canonical_spec("gemm:n=1024,k=1024,fmt=nvfp4");
  const Family& f = family_of(spec);
  const std::string target = f.default_config(spec, 1, Arch{this_device().sm});
  TuneHooks hooks;
  hooks.sabotage = [&](const std::string& config) { return config == target; };
  TuningRecord rec = tune_spec(f, spec, 1, *jit, 8, hooks);
  bool seen = false;
  for (const auto& c : rec.candidates) {
    if (c.config == target) {
      seen = true;
      EXPECT_EQ(c.status, "wrong") << c.detail;
    }
  }
  EXPECT_TRUE(seen);
  EXPECT_NE(rec.config, target);
}

// Attention through the tuner's AttentionWorkload: a small decode spec and a kv_write spec tune
// end to end, every candidate checks right, and the record is stored; the same for an fp8
// (E4M3, per-tensor scale) decode and kv_write, what `onecat tune --kv-cache-dtype fp8` plans
// (added 2026-11-30 without GPU time left: first run in the next device call).
TEST_F(TuneGpu, TunesAttention) {
  const DeviceFingerprint device = this_device();
  for (auto [spec, bucket] : {std::pair{"attention:op=decode,heads=8,kv_heads=2,dim=128,page=16,kv=f16", int64_t(4)},
                              std::pair{"attention:op=kv_write,kv_heads=2,dim=128,page=16,kv=f16", int64_t(16)},
                              std::pair{"attention:op=decode,heads=8,kv_heads=2,dim=128,page=16,kv=e4m3,kv_scale=tensor", int64_t(4)},
                              std::pair{"attention:op=kv_write,kv_heads=2,dim=128,page=16,kv=e4m3,kv_scale=tensor", int64_t(16)}}) {
    const Family& f = family_of(spec);
    TuningRecord rec = tune_spec(f, f.canonical_spec(spec), bucket, *jit, 8);
    rec.key = tuning_key(device, rec.family, rec.generator_version, rec.spec, rec.bucket);
    EXPECT_FALSE(rec.candidates.empty()) << spec;
    EXPECT_GT(rec.best_us, 0) << spec;
    EXPECT_GT(rec.default_us, 0) << spec;
    for (const auto& c : rec.candidates) EXPECT_NE(c.status, "wrong") << spec << " " << c.config << " " << c.detail;
    store->put_tuning(rec);
    EXPECT_TRUE(store->find_tuning(rec.key).has_value()) << spec;
  }
  release_workloads();
}

// Session::tune_and_record, the one "tune and record" the CLI and Python call: a record is
// made by the tuner passed in, keyed and stored once, served from the store afterwards (the
// tuner is not called again unless asked to retune), and a PreparedOp made before the record
// dispatches it from its next call. The tuner here records a config other than the default, so
// the switch is visible.
TEST(SessionGpu, TuneAndRecordIsDispatchedByPreparedOps) {
  char tmpl[] = "/tmp/onecat-session-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  setenv("ONECAT_CACHE_DIR", dir.c_str(), 1);
  Session& session = Session::get();
  session.reset();
  session.use_gpu(0);
  const Family& f = family_of("rmsnorm:hidden=4096,dtype=f16,residual=0");
  const std::string spec = f.canonical_spec("rmsnorm:hidden=4096,dtype=f16,residual=0");
  const int64_t bucket = 16;
  const std::string def = f.default_config(spec, bucket, session.arch());
  std::string other;
  for (const auto& c : f.candidate_configs(spec, session.arch())) {
    if (c != def && f.fits_bucket(spec, c, bucket)) other = c;
  }
  ASSERT_FALSE(other.empty());
  PreparedOp<rmsnorm::Spec, rmsnorm::Config, rmsnorm::Args> op(session, spec);
  EXPECT_EQ(op.config(bucket).to_string(), def);

  int calls = 0;
  auto tuner = [&](const Family& family, const std::string& s, int64_t b) {
    ++calls;
    TuningRecord r;
    r.device = session.device();
    r.family = std::string(family.name());
    r.generator_version = family.generator_version();
    r.spec = s;
    r.bucket = b;
    r.config = other;
    r.default_config = def;
    r.best_us = 1, r.default_us = 2;
    return r;
  };
  bool tuned = false;
  const TuningRecord made = session.tune_and_record(spec, bucket, /*retune=*/false, tuner, &tuned);
  EXPECT_TRUE(tuned);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(made.key, session.tuning_key(spec, bucket));
  ASSERT_TRUE(session.find_tuning(spec, bucket).has_value());
  EXPECT_EQ(session.find_tuning(spec, bucket)->config, other);
  EXPECT_EQ(op.config(bucket).to_string(), other) << "the op did not pick up the new record";

  const TuningRecord stored = session.tune_and_record(spec, bucket, /*retune=*/false, tuner, &tuned);
  EXPECT_FALSE(tuned);
  EXPECT_EQ(calls, 1) << "a stored record was tuned again";
  EXPECT_EQ(stored.config, other);
  session.tune_and_record(spec, bucket, /*retune=*/true, tuner, &tuned);
  EXPECT_TRUE(tuned);
  EXPECT_EQ(calls, 2);
  EXPECT_THROW(session.tune_and_record(spec, 3, false, tuner), InputError) << "3 is not a bucket";
  unsetenv("ONECAT_CACHE_DIR");
  session.reset();
}

// `onecat bench` for every family through the harness registry: each point's config passes
// its check in the run, its traffic and ceilings are counted (flops for gemm and attention,
// bandwidth only for the rest), and only gemm has a peer (cuBLAS).
TEST(BenchGpu, EveryFamilyAgainstItsCeilings) {
  Session& session = Session::get();
  session.use_gpu(0);
  const bool cublas = Cublas::find() != nullptr;
  for (const auto& [spec, computes, peer] :
       {std::tuple{"rmsnorm:hidden=4096,dtype=f16,residual=1", false, false},
        std::tuple{"gemm:n=1024,k=1024,fmt=f16", true, true}, std::tuple{"gemm:n=1024,k=1024,fmt=awq4,epi=bias", true, false},
        std::tuple{"attention:op=decode,heads=8,kv_heads=2,dim=128,page=16,kv=f16", true, false},
        std::tuple{"attention:op=prefill,heads=8,kv_heads=2,dim=128,page=16,kv=f16", true, false},
        std::tuple{"attention:op=kv_write,kv_heads=2,dim=128,page=16,kv=e4m3,kv_scale=tensor", false, false},
        std::tuple{"embedding:vocab=32000,hidden=4096", false, false},
        std::tuple{"rope:heads=16,kv_heads=4,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16", false, false},
        std::tuple{"sampling:op=sample,vocab=1000,logprobs=20", false, false},
        std::tuple{"sampling:op=argmax,vocab=1000", false, false}}) {
    SCOPED_TRACE(spec);
    const BenchResult b = bench_spec(session, spec, {1, 4}, BenchOptions{});
    EXPECT_EQ(b.family, family_of(spec).name());
    EXPECT_GT(b.copy_gbps, 0);
    EXPECT_EQ(!b.peer.empty(), peer && cublas) << b.peer;
    ASSERT_EQ(b.points.size(), 2u);
    for (const BenchPoint& p : b.points) {
      EXPECT_GE(p.error_vs_reference, 0);
      EXPECT_GT(p.ours.median_us, 0);
      EXPECT_GT(p.bytes, 0);
      EXPECT_GT(p.bandwidth_floor_us, 0);
      EXPECT_NEAR(p.gbps, p.bytes / p.ours.median_us / 1e3, p.gbps * 1e-9);
      EXPECT_EQ(p.flops > 0, computes);
      if (computes && cublas) {
        EXPECT_GT(b.peak_tflops, 0);
        EXPECT_GT(p.flop_floor_us, 0);
      }
      if (!b.peer.empty()) {
        EXPECT_GT(p.peer_us, 0);
        EXPECT_GE(p.error_vs_peer, 0);
        EXPECT_LT(p.error_vs_peer, 1e-2);
      }
    }
    EXPECT_GT(b.points[1].bytes, b.points[0].bytes) << "4 tokens (or sequences) move more than 1";
  }
}

// moe op=decode's bench peer, the layer as four launches (route, gate_up, down, combine), run on
// every timing routing back to back before the compared one, as the timing runs them: the same
// output as the one-launch layer.
TEST(BenchGpu, MoeDecodeAgainstItsFourLaunches) {
  Session& session = Session::get();
  session.use_gpu(0);
  for (const auto& [spec, tokens] :
       {std::pair{"moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=awq4",
                  std::vector<int64_t>{2, 4, 8}},
        std::pair{"moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=nvfp4", std::vector<int64_t>{4}},
        std::pair{"moe:op=decode,experts=16,topk=3,norm=1,hidden=320,inter=192,fmt=gptq4,group=64,act_order=1",
                  std::vector<int64_t>{1, 5}}}) {
    SCOPED_TRACE(spec);
    const BenchResult b = bench_spec(session, spec, tokens, BenchOptions{});
    EXPECT_EQ(b.peer, "four launches");
    ASSERT_EQ(b.points.size(), tokens.size());
    for (const BenchPoint& p : b.points) {
      EXPECT_GT(p.peer_us, 0);
      EXPECT_GE(p.error_vs_peer, 0);
      EXPECT_LT(p.error_vs_peer, 1e-2) << p.m << " tokens";
    }
  }
}

// `onecat bench --shapes`'s context points: attention decode over m sequences of exactly the
// context given, checked in the run; the traffic follows the keys.
TEST(BenchGpu, AttentionAtAGivenContext) {
  Session& session = Session::get();
  session.use_gpu(0);
  const std::string spec = "attention:op=decode,heads=28,kv_heads=4,dim=128,page=16,kv=f16";
  BenchOptions at;
  at.context = 1000;  // not a whole number of pages
  const BenchResult short_ctx = bench_spec(session, spec, {1, 3}, at);
  at.context = 8192;
  const BenchResult long_ctx = bench_spec(session, spec, {1, 3}, at);
  EXPECT_EQ(long_ctx.context, 8192);
  ASSERT_EQ(short_ctx.points.size(), 2u);
  ASSERT_EQ(long_ctx.points.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GE(short_ctx.points[i].error_vs_reference, 0);
    EXPECT_GE(long_ctx.points[i].error_vs_reference, 0);
    // K and V of every sequence dominate: 8192 / 1000 of the bytes, less the q/out/table share.
    const double ratio = long_ctx.points[i].bytes / short_ctx.points[i].bytes;
    EXPECT_GT(ratio, 7.9);
    EXPECT_LT(ratio, 8.2);
  }
  BenchOptions prefill;
  prefill.context = 1024;
  EXPECT_THROW(bench_spec(session, "attention:op=prefill,heads=8,kv_heads=2,dim=128,page=16,kv=f16", {64}, prefill),
               InputError);
}

// Timing measures the GPU, not the launching thread: a 5-µs kernel launched by a thread that
// takes 30 µs per launch still times at about 5 µs once each batch waits behind the spin
// kernel, and at the thread's rate without it.
TEST(MeasureGpu, TimesTheGpuNotTheLaunchRate) {
  use_device(0);
  auto slow_launch = [](int) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
    while (std::chrono::steady_clock::now() < until) {
    }
    gpu_spin(5000);
  };
  const Timing fast = measure([](int) { gpu_spin(5000); });
  EXPECT_GT(fast.median_us, 4.0);
  EXPECT_LT(fast.median_us, 9.0);
  const Timing queued = measure(slow_launch);
  EXPECT_GT(queued.median_us, 4.0);
  EXPECT_LT(queued.median_us, 9.0) << "the batch ran at the launching thread's pace";
  MeasureOptions unqueued;
  unqueued.queue_ahead = false;
  const Timing paced = measure(slow_launch, unqueued);
  EXPECT_GT(paced.median_us, 25.0) << "without the spin kernel the events time the launch rate";
}

// measure_graph captures a batch once and replays it: the same 5-µs kernels from the slow
// thread time at about 5 µs, every batch counts its kernels, and a launch that throws inside
// the capture ends it cleanly (the error comes out, and the next capture works).
TEST(MeasureGpu, GraphReplaysTheBatch) {
  use_device(0);
  int calls = 0;
  auto slow_launch = [&](int, CUstream stream) {
    ++calls;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
    while (std::chrono::steady_clock::now() < until) {
    }
    gpu_spin(5000, stream);
  };
  MeasureOptions o;
  const Timing t = measure_graph(slow_launch, o);
  EXPECT_GT(t.median_us, 4.0);
  EXPECT_LT(t.median_us, 9.0);
  EXPECT_EQ(t.launches % o.batch, 0);
  EXPECT_GE(t.launches, o.min_batches * o.batch);
  EXPECT_EQ(calls, o.warmup + o.batch) << "the replays launched from the CPU";
  auto failing = [](int i, CUstream stream) {
    if (i == 3) throw Error("launch 3 fails");
    gpu_spin(1000, stream);
  };
  o.warmup = 1;
  EXPECT_THROW(measure_graph(failing, o), Error);
  const Timing again = measure_graph([](int, CUstream stream) { gpu_spin(2000, stream); }, o);
  EXPECT_GT(again.median_us, 1.5);
}

}  // namespace
}  // namespace onecat
