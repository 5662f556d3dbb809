// The embedding family on the CPU: the reference gather, spec and config text, defaults and
// candidates, and the static quality of its code (NVRTC for sm_70 and sm_90: no spills,
// 128-bit loads and stores).
#include "runtime/cpu/embedding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "codegen/embedding/config.h"
#include "codegen/embedding/space.h"
#include "codegen/embedding/spec.h"
#include "codegen/family.h"
#include "base/half.h"
#include "base/error.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/compiler.h"
#include "tests/compile_checks.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::expect_throw;

std::vector<uint16_t> random_halves(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = cpu::float_to_half(dist(rng));
  return v;
}

TEST(EmbeddingReference, GathersRowsAndZeroesOutOfRangeIds) {
  std::mt19937 rng(3);
  const int64_t vocab = 101, hidden = 72, tokens = 13;
  const auto table = random_halves(size_t(vocab * hidden), rng, 1.f);
  const std::vector<int> ids = {0, 100, 5, -1, 101, 7, 7, 50, 2147483647, -2147483647 - 1, 99, 1, 3};
  std::vector<uint16_t> out(size_t(tokens * hidden), 0xFFFF);
  cpu::embedding(out.data(), table.data(), ids.data(), tokens, hidden, vocab);
  for (int64_t t = 0; t < tokens; ++t) {
    const int id = ids[size_t(t)];
    for (int64_t d = 0; d < hidden; ++d) {
      const uint16_t want = id >= 0 && id < vocab ? table[size_t(id * hidden + d)] : uint16_t(0);
      ASSERT_EQ(out[size_t(t * hidden + d)], want) << "token " << t << " id " << id;
    }
  }
}

TEST(EmbeddingSpec, CanonicalFormAndRefusals) {
  const Family& f = family_of("embedding:vocab=151936,hidden=4096");
  EXPECT_EQ(f.name(), "embedding");
  EXPECT_EQ(f.canonical_spec("embedding:hidden=4096,vocab=151936"), "embedding:vocab=151936,hidden=4096");
  expect_throw<InputError>([&] { f.canonical_spec("embedding:vocab=0,hidden=64"); }, {"vocab"});
  expect_throw<InputError>([&] { f.canonical_spec("embedding:vocab=10,hidden=64,dtype=f16"); }, {"dtype"});
  expect_throw<InputError>([&] { f.canonical_spec("embedding:vocab=10"); }, {"hidden"});
  expect_throw<InputError>([&] { embedding::Spec::parse("rope:vocab=10,hidden=64"); }, {"not an embedding spec"});
}

TEST(EmbeddingConfig, DefaultsAndCandidatesAreValid) {
  for (int hidden : {1, 7, 64, 100, 2048, 3584, 4096, 5120, 8191, 8192, 16384, 65536}) {
    const embedding::Spec s{32000, hidden};
    for (int64_t m : {1, 3, 64, 4096}) {
      const embedding::Config c = embedding::default_config(s, m);
      EXPECT_FALSE(c.invalid_reason(s)) << hidden << " " << m;
    }
    const auto candidates = embedding::candidate_configs(s);
    for (const auto& c : candidates) EXPECT_FALSE(c.invalid_reason(s)) << hidden << " " << c.to_string();
    for (int64_t m : {int64_t(hidden >= 64 ? 1 : 64), int64_t(64)}) {  // tiny rows fill a CTA with 32+ tokens
      EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) { return embedding::fits_bucket(s, c, m); }))
          << hidden << " " << m;
    }
  }
  // A 4096-wide row takes 128-bit accesses, two per thread.
  EXPECT_EQ(embedding::default_config({32000, 4096}, 1).to_string(), "row_threads=256,vec=8,rows=1");
  const embedding::Spec s{32000, 4096};
  expect_throw<InputError>([&] { embedding::Config::parse(s, "row_threads=128,vec=3,rows=1"); }, {"vec must be"});
  expect_throw<InputError>([&] { embedding::Config::parse(s, "row_threads=16,vec=8,rows=1"); }, {"below one warp"});
  expect_throw<InputError>([&] { embedding::Config::parse(s, "row_threads=1,vec=1,rows=32"); },
                           {"accesses per thread"});
  expect_throw<InputError>(
      [&] {
        embedding::Config::parse({10, 100}, "row_threads=32,vec=8,rows=1");
      },
      {"does not divide"});
}

TEST(EmbeddingStaticQuality, DefaultsCompileWithoutSpillsForSm70AndSm90) {
  for (Arch arch : {Arch{70}, Arch{90}}) {
    std::vector<CompileRequest> reqs;
    for (const char* spec : {"embedding:vocab=151936,hidden=4096", "embedding:vocab=128256,hidden=5120",
                             "embedding:vocab=1000,hidden=100", "embedding:vocab=50,hidden=7"}) {
      const Family& f = family_of(spec);
      std::set<std::string> configs;
      for (int64_t m : {1, 8, 4096}) configs.insert(f.default_config(spec, m, arch));
      for (const auto& c : configs) reqs.push_back(CompileRequest::make(f, spec, c, arch));
    }
    ASSERT_NO_FATAL_FAILURE(test::expect_compile_without_spills(reqs, true));
    const char* spec = "embedding:vocab=151936,hidden=4096";
    const Family& f = family_of(spec);
    const std::string ptx = compile_to_ptx(CompileRequest::make(f, spec, f.default_config(spec, 1, arch), arch),
                                           NvrtcRegistry::get().for_arch(arch));
    EXPECT_NE(ptx.find("ld.global.nc.v4.u32"), std::string::npos) << arch.name();
    EXPECT_NE(ptx.find("st.global.v4.u32"), std::string::npos) << arch.name();
  }
}

}  // namespace
}  // namespace onecat
