// Spec and config text: parsing, canonical form, validation messages, the search space
// and Arch::parse.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <set>
#include <string>
#include <vector>

#include "base/arch.h"
#include "base/error.h"
#include "codegen/family.h"
#include "codegen/rmsnorm/config.h"
#include "codegen/rmsnorm/space.h"
#include "codegen/rmsnorm/spec.h"
#include "codegen/spec_text.h"
#include "codegen/tokens.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::expect_throw;

// ---------------------------------------------------------------------------------------
// split_spec / FieldReader

TEST(SpecText, SplitSpecSeparatesFamilyAndFields) {
  SpecText st = split_spec("rmsnorm:hidden=4096,dtype=f16,residual=1");
  EXPECT_EQ(st.family, "rmsnorm");
  EXPECT_EQ(st.fields, "hidden=4096,dtype=f16,residual=1");

  SpecText empty_fields = split_spec("rmsnorm:");
  EXPECT_EQ(empty_fields.family, "rmsnorm");
  EXPECT_EQ(empty_fields.fields, "");
}

TEST(SpecText, SplitSpecRejectsMissingOrBadFamily) {
  expect_throw<InputError>([] { split_spec("hidden=4096,dtype=f16,residual=1"); }, {"has no family", "family:key=value"});
  expect_throw<InputError>([] { split_spec(":hidden=4096"); }, {"is not a family name"});
  expect_throw<InputError>([] { split_spec("RMSNorm:hidden=4096"); }, {"'RMSNorm' is not a family name"});
}

TEST(SpecText, FieldReaderReadsTypedFields) {
  FieldReader r("a=12,b=1,c=x,d=-5", "config 'test'");
  EXPECT_TRUE(r.has("a"));
  EXPECT_FALSE(r.has("z"));
  EXPECT_EQ(r.integer("a", 0, 100), 12);
  EXPECT_TRUE(r.flag("b"));
  EXPECT_EQ(r.choice("c", {"w", "x"}), "x");
  EXPECT_EQ(r.integer("d", -10, 10), -5);
  EXPECT_NO_THROW(r.finish());
}

TEST(SpecText, FieldReaderMessagesNameTheProblem) {
  // Each message starts with the `what` text so a person sees which input was wrong.
  expect_throw<InputError>([] { FieldReader("a=1,a=2", "config 'x'"); }, {"config 'x'", "field 'a' is given twice"});
  expect_throw<InputError>([] { FieldReader("a=1,", "config 'x'"); }, {"config 'x'", "is not key=value"});
  expect_throw<InputError>([] { FieldReader("a=", "config 'x'"); }, {"'a=' is not key=value"});
  expect_throw<InputError>([] { FieldReader("=1", "config 'x'"); }, {"'=1' is not key=value"});
  expect_throw<InputError>([] { FieldReader("a", "config 'x'"); }, {"'a' is not key=value"});
  expect_throw<InputError>([] { FieldReader("a=1,,b=2", "config 'x'"); }, {"is not key=value"});
  expect_throw<InputError>([] { FieldReader("A=1", "config 'x'"); }, {"'A' is not a field name"});
  expect_throw<InputError>([] { FieldReader("a=1", "config 'x'").integer("b", 0, 9); }, {"missing field 'b'"});
  expect_throw<InputError>([] { FieldReader("a=1x", "config 'x'").integer("a", 0, 9); }, {"a='1x' is not an integer"});
  expect_throw<InputError>([] { FieldReader("a=+1", "config 'x'").integer("a", 0, 9); }, {"is not an integer"});
  expect_throw<InputError>([] { FieldReader("a=10", "config 'x'").integer("a", 0, 9); }, {"a=10 is out of range [0, 9]"});
  expect_throw<InputError>([] { FieldReader("a=2", "config 'x'").flag("a"); }, {"out of range [0, 1]"});
  expect_throw<InputError>([] { FieldReader("a=q", "config 'x'").choice("a", {"p", "r"}); }, {"a='q' is not one of: p, r"});
  expect_throw<InputError>(
      [] {
        FieldReader r("a=1,zz=3", "config 'x'");
        r.integer("a", 0, 9);
        r.finish();
      },
      {"unknown field 'zz'"});
}

TEST(SpecText, JoinFields) {
  EXPECT_EQ(join_fields({}), "");
  EXPECT_EQ(join_fields({{"a", "1"}}), "a=1");
  EXPECT_EQ(join_fields({{"b", "2"}, {"a", "1"}}), "b=2,a=1");
}

// ---------------------------------------------------------------------------------------
// rmsnorm spec

TEST(RmsnormSpec, RoundTripsManySpecs) {
  std::vector<int> hiddens = {1, 2, 3, 7, 64, 127, 128, 896, 1024, 2048, 3584, 4096, 5120, 8192, 12288, 16383, 32768};
  for (int hidden : hiddens) {
    for (int residual : {0, 1}) {
      const std::string text =
          "rmsnorm:hidden=" + std::to_string(hidden) + ",dtype=f16,residual=" + std::to_string(residual);
      rmsnorm::Spec s = rmsnorm::Spec::parse(text);
      EXPECT_EQ(s.hidden, hidden);
      EXPECT_EQ(s.residual, residual == 1);
      EXPECT_EQ(s.to_string(), text) << "canonical text is the documented order";
      EXPECT_EQ(rmsnorm::Spec::parse(s.to_string()), s);
      EXPECT_EQ(family_of(text).canonical_spec(text), text);
    }
  }
}

TEST(RmsnormSpec, FieldOrderAndLeadingZerosCanonicalise) {
  const std::string canonical = "rmsnorm:hidden=4096,dtype=f16,residual=1";
  for (const char* variant : {"rmsnorm:residual=1,dtype=f16,hidden=4096", "rmsnorm:dtype=f16,hidden=4096,residual=1",
                              "rmsnorm:dtype=f16,residual=1,hidden=4096", "rmsnorm:hidden=04096,dtype=f16,residual=01"}) {
    EXPECT_EQ(rmsnorm::Spec::parse(variant).to_string(), canonical) << variant;
    EXPECT_EQ(family_of(variant).canonical_spec(variant), canonical) << variant;
  }
}

TEST(RmsnormSpec, MalformedSpecsAreRejectedWithTheReason) {
  struct Case {
    const char* spec;
    std::vector<const char*> needles;
  };
  const std::vector<Case> cases = {
      {"hidden=4096,dtype=f16,residual=1", {"has no family"}},
      {"rmsnorm:hidden=4096,dtype=f16,residual=1,eps=1", {"unknown field 'eps'"}},
      {"rmsnorm:hidden=4096,hidden=4096,dtype=f16,residual=1", {"field 'hidden' is given twice"}},
      {"rmsnorm:dtype=f16,residual=1", {"missing field 'hidden'"}},
      {"rmsnorm:hidden=4096,residual=1", {"missing field 'dtype'"}},
      {"rmsnorm:hidden=4096,dtype=f16", {"missing field 'residual'"}},
      {"rmsnorm:", {"missing field 'hidden'"}},
      {"rmsnorm:hidden=4k,dtype=f16,residual=1", {"hidden='4k' is not an integer"}},
      {"rmsnorm:hidden=4096.0,dtype=f16,residual=1", {"is not an integer"}},
      {"rmsnorm:hidden=0,dtype=f16,residual=1", {"hidden=0 is out of range [1, 32768]"}},
      {"rmsnorm:hidden=70000,dtype=f16,residual=1", {"hidden=70000 is out of range [1, 32768]"}},
      {"rmsnorm:hidden=16385,dtype=f16,residual=1", {"odd hidden size must be at most 16384"}},
      {"rmsnorm:hidden=-4096,dtype=f16,residual=1", {"out of range"}},
      {"rmsnorm:hidden=99999999999999999999,dtype=f16,residual=1", {"is not an integer"}},
      {"rmsnorm:hidden=4096,dtype=bf16,residual=1", {"dtype='bf16' is not one of: f16"}},
      {"rmsnorm:hidden=4096,dtype=f16,residual=2", {"residual=2 is out of range [0, 1]"}},
      {"rmsnorm:hidden=,dtype=f16,residual=1", {"'hidden=' is not key=value"}},
      {"rmsnorm:hidden=4096,dtype=f16,residual=1,", {"is not key=value"}},
      {"rmsnorm:hidden=4096;dtype=f16;residual=1", {"is not"}},
      {"layernorm:hidden=4096,dtype=f16,residual=1", {"is not an rmsnorm spec"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    std::string msg = expect_throw<InputError>([&] { rmsnorm::Spec::parse(c.spec); }, {});
    for (const char* n : c.needles) EXPECT_TRUE(test::contains(msg, n)) << "needle \"" << n << "\" not in: " << msg;
    // Every message names the spec it is about, except the unknown family, named as a whole.
    EXPECT_TRUE(test::contains(msg, c.spec)) << msg;
  }
}

TEST(Family, FamilyOfFindsRmsnormAndRejectsUnknownFamilies) {
  const Family& f = family_of("rmsnorm:hidden=4096,dtype=f16,residual=1");
  EXPECT_EQ(f.name(), "rmsnorm");
  EXPECT_GE(f.generator_version(), 1);
  EXPECT_FALSE(all_families().empty());
  EXPECT_EQ(all_families().front(), &f);

  expect_throw<InputError>([] { family_of("layernorm:hidden=4096"); },
                           {"unknown kernel family 'layernorm'", "known: rmsnorm"});
  expect_throw<InputError>([] { family_of("hidden=4096"); }, {"has no family"});
  expect_throw<InputError>([] { family_of("Rms:hidden=4096"); }, {"is not a family name"});
}

// ---------------------------------------------------------------------------------------
// rmsnorm config

rmsnorm::Spec spec_of(int hidden, bool residual = false) { return rmsnorm::Spec{hidden, residual}; }

TEST(RmsnormConfig, ParseRoundTripsAndCanonicalises) {
  const rmsnorm::Spec spec = spec_of(4096);
  rmsnorm::Config c = rmsnorm::Config::parse(spec, "rows=2,vec=8,row_threads=64");
  EXPECT_EQ(c.row_threads, 64);
  EXPECT_EQ(c.vec, 8);
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(c.to_string(), "row_threads=64,vec=8,rows=2");
  EXPECT_EQ(rmsnorm::Config::parse(spec, c.to_string()), c);
  EXPECT_EQ(c.cta_threads(), 128);
  EXPECT_EQ(c.iters(spec), 8);  // 512 vectors over 64 threads

  const Family& f = family_of("rmsnorm:hidden=4096,dtype=f16,residual=0");
  EXPECT_EQ(f.canonical_config("rmsnorm:residual=0,hidden=4096,dtype=f16", "vec=4,rows=1,row_threads=256"),
            "row_threads=256,vec=4,rows=1");
}

TEST(RmsnormConfig, ValidityRules) {
  struct Case {
    int hidden;
    const char* config;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {4095, "row_threads=128,vec=8,rows=1", "vec=8 does not divide hidden=4095"},
      {4094, "row_threads=128,vec=4,rows=1", "vec=4 does not divide hidden=4094"},
      {4096, "row_threads=128,vec=3,rows=1", "vec must be 1, 2, 4 or 8"},
      {4096, "row_threads=96,vec=8,rows=1", "row_threads must be a power of two"},
      {4096, "row_threads=64,vec=8,rows=3", "rows must be a power of two"},
      {4096, "row_threads=1024,vec=8,rows=2", "exceeds 1024 threads per CTA"},
      {4096, "row_threads=8,vec=8,rows=2", "below one warp"},
      {32768, "row_threads=256,vec=8,rows=1", "each thread would hold 128 values (max 64)"},
      {8192, "row_threads=128,vec=8,rows=8", "1024-thread CTA leaves 64 registers per thread (at most 32 values)"},
      {16383, "row_threads=512,vec=1,rows=1", "32 loads per thread (max 16)"},
      {8192, "row_threads=32,vec=2,rows=1", "each thread would hold 256 values"},
      {64, "row_threads=1024,vec=8,rows=1", "more than half the row's threads idle"},
      {4096, "row_threads=0,vec=8,rows=1", "row_threads=0 is out of range"},
      {4096, "row_threads=128,vec=16,rows=1", "vec=16 is out of range [1, 8]"},
      {4096, "row_threads=2048,vec=8,rows=1", "row_threads=2048 is out of range [1, 1024]"},
      {4096, "row_threads=128,vec=8", "missing field 'rows'"},
      {4096, "row_threads=128,vec=8,rows=1,stages=2", "unknown field 'stages'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.config) + " for hidden=" + std::to_string(c.hidden));
    expect_throw<InputError>([&] { rmsnorm::Config::parse(spec_of(c.hidden), c.config); }, {c.needle});
  }
  // The same rules through invalid_reason, without text.
  EXPECT_FALSE(rmsnorm::Config({128, 8, 1}).invalid_reason(spec_of(4096)).has_value());
  EXPECT_TRUE(rmsnorm::Config({128, 8, 1}).invalid_reason(spec_of(4100)).has_value());
  EXPECT_FALSE(rmsnorm::Config({128, 4, 1}).invalid_reason(spec_of(4100)).has_value());
  // A message for a config that cannot run the spec names both.
  expect_throw<InputError>([] { rmsnorm::Config::parse(spec_of(4095), "row_threads=128,vec=8,rows=1"); },
                           {"config 'row_threads=128,vec=8,rows=1' cannot run rmsnorm:hidden=4095,dtype=f16,residual=0"});
}

// Hidden sizes for the space tests: every size up to 300, odd, prime and LLM sizes, and
// the edges up to the largest row (32768; 16384 when odd).
std::vector<int> hidden_sizes() {
  std::vector<int> out;
  for (int h = 1; h <= 300; ++h) out.push_back(h);
  for (int h : {383, 509, 511, 512, 513, 1000, 1021, 1023, 1024, 1025, 1536, 2047, 2048, 2049, 2560, 3072, 3584, 4095,
                4096, 4097, 5120, 6144, 7168, 7919, 8192, 10007, 12288, 14336, 16383, 16384, 18432, 24576, 32766,
                32768}) {
    out.push_back(h);
  }
  for (int h = 301; h < 16384; h += 997) out.push_back(h);  // a spread of odd values
  for (int h = 16386; h <= 32768; h += 298) out.push_back(h);  // and of even ones above
  return out;
}

TEST(RmsnormSpace, DefaultConfigIsValidForEveryHiddenSize) {
  const std::vector<int> sizes = hidden_sizes();
  ASSERT_GT(sizes.size(), 400u);
  for (int hidden : sizes) {
    for (int64_t m : {int64_t(1), int64_t(3), int64_t(64), int64_t(100000)}) {
      const rmsnorm::Spec spec = spec_of(hidden, hidden % 2 == 1);
      rmsnorm::Config c;
      ASSERT_NO_THROW(c = rmsnorm::default_config(spec, m)) << "hidden=" << hidden << " m=" << m;
      auto why = c.invalid_reason(spec);
      EXPECT_FALSE(why.has_value()) << "hidden=" << hidden << " m=" << m << ": " << why.value_or("");
      // The text form parses back to the same config under the full validation.
      EXPECT_EQ(rmsnorm::Config::parse(spec, c.to_string()), c) << hidden;
      // Deterministic: the same inputs give the same default.
      EXPECT_EQ(rmsnorm::default_config(spec, m), c) << hidden;
      EXPECT_GE(c.cta_threads(), rmsnorm::Config::kMinCtaThreads);
      EXPECT_LE(c.cta_threads(), rmsnorm::Config::kMaxCtaThreads);
      EXPECT_LE(c.iters(spec) * c.vec, rmsnorm::Config::kMaxValuesPerThread);
    }
  }
}

TEST(RmsnormSpace, DefaultConfigUsesTheWidestVectorThatDivides) {
  EXPECT_EQ(rmsnorm::default_config(spec_of(4096), 1).vec, 8);
  EXPECT_EQ(rmsnorm::default_config(spec_of(4100), 1).vec, 4);
  EXPECT_EQ(rmsnorm::default_config(spec_of(4098), 1).vec, 2);
  EXPECT_EQ(rmsnorm::default_config(spec_of(4097), 1).vec, 1);
  // The family adapter gives the same text as the typed function.
  const Family& f = family_of("rmsnorm:hidden=4096,dtype=f16,residual=1");
  EXPECT_EQ(f.default_config("rmsnorm:hidden=4096,dtype=f16,residual=1", 1, Arch{70}),
            rmsnorm::default_config(spec_of(4096, true), 1).to_string());
}

TEST(RmsnormSpace, CandidateConfigsAreValidUniqueAndNonEmpty) {
  for (int hidden : hidden_sizes()) {
    const rmsnorm::Spec spec = spec_of(hidden);
    const std::vector<rmsnorm::Config> cands = rmsnorm::candidate_configs(spec);
    ASSERT_FALSE(cands.empty()) << "hidden=" << hidden;
    std::set<std::string> seen;
    for (const auto& c : cands) {
      auto why = c.invalid_reason(spec);
      EXPECT_FALSE(why.has_value()) << "hidden=" << hidden << " " << c.to_string() << ": " << why.value_or("");
      EXPECT_TRUE(seen.insert(c.to_string()).second) << "duplicate " << c.to_string() << " for hidden=" << hidden;
    }
  }
}

TEST(RmsnormSpace, CandidatesIncludeTheDefaultForTypicalModelSizes) {
  // Typical LLM hidden sizes (Llama, Qwen, Mistral, …). For tiny rows the m=1 default uses
  // a single-warp CTA, which the search deliberately skips, so only typical sizes are held
  // to this.
  for (int hidden : {896, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 12288, 14336, 16384}) {
    const rmsnorm::Spec spec = spec_of(hidden);
    const auto cands = rmsnorm::candidate_configs(spec);
    for (int64_t m : {1, 16, 4096}) {
      const rmsnorm::Config d = rmsnorm::default_config(spec, m);
      EXPECT_NE(std::find(cands.begin(), cands.end(), d), cands.end())
          << "default " << d.to_string() << " (m=" << m << ") missing from candidates of hidden=" << hidden;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Arch

TEST(Arch, ParsesTheAcceptedForms) {
  EXPECT_EQ(Arch::parse("sm_70").sm, 70);
  EXPECT_EQ(Arch::parse("70").sm, 70);
  EXPECT_EQ(Arch::parse("7.0").sm, 70);
  EXPECT_EQ(Arch::parse("sm_75").sm, 75);
  EXPECT_EQ(Arch::parse("8.6").sm, 86);
  EXPECT_EQ(Arch::parse("sm_90").sm, 90);
  EXPECT_EQ(Arch::parse("sm_120").sm, 120);
  EXPECT_EQ(Arch::parse("sm_70").name(), "sm_70");
  EXPECT_FALSE(Arch::parse("sm_70").has_mma_m16n8k16());
  EXPECT_TRUE(Arch::parse("sm_80").has_mma_m16n8k16());
  EXPECT_EQ(Arch::parse("7.0"), Arch{70});
  EXPECT_EQ(Arch::parse("10.0").sm, 100);
  EXPECT_EQ(Arch::parse("12.0").sm, 120);
}

TEST(Arch, RejectsOldAndMalformedArchs) {
  expect_throw<InputError>([] { Arch::parse("sm_60"); }, {"sm_60 is older than Volta", "sm_70"});
  expect_throw<InputError>([] { Arch::parse("6.1"); }, {"sm_61 is older than Volta"});
  for (const char* bad : {"", "garbage", "sm_", "sm_7x", "compute_70", "sm70", "7.0.0", "1000", "sm_-70", "70 ", "7..0",
                          "7.", ".7", "sm_90a", "sm_070"}) {
    SCOPED_TRACE(bad);
    expect_throw<InputError>([&] { Arch::parse(bad); }, {"is not a GPU architecture", "sm_70"});
  }
}

// ---------------------------------------------------------------------------------------
// Token counts (M)

TEST(Tokens, Pow2CeilCoversTheWholeRange) {
  EXPECT_EQ(pow2_ceil(-5), 1);
  EXPECT_EQ(pow2_ceil(0), 1);
  EXPECT_EQ(pow2_ceil(1), 1);
  EXPECT_EQ(pow2_ceil(2), 2);
  EXPECT_EQ(pow2_ceil(3), 4);
  EXPECT_EQ(pow2_ceil(4096), 4096);
  EXPECT_EQ(pow2_ceil((int64_t(1) << 30) + 1), int64_t(1) << 31);
  EXPECT_EQ(pow2_ceil(kMaxTokens), int64_t(1) << 31);
  EXPECT_EQ(pow2_ceil((int64_t(1) << 40) - 7), int64_t(1) << 40);
  EXPECT_EQ(pow2_ceil(int64_t(1) << 62), int64_t(1) << 62);
  expect_throw<Error>([] { pow2_ceil((int64_t(1) << 62) + 1); }, {"2^62"});
  EXPECT_NO_THROW(check_token_count(1));
  EXPECT_NO_THROW(check_token_count(kMaxTokens));
  for (int64_t bad : {int64_t(0), int64_t(-1), kMaxTokens + 1, int64_t(1) << 40}) {
    expect_throw<InputError>([&] { check_token_count(bad); }, {"token count m=" + std::to_string(bad), "1 to 2147483647"});
  }
}

// Runs fn in a child process; false (and the child killed) when it takes longer than the
// limit — a hang fails the test instead of stopping the suite.
bool finishes_within(std::chrono::seconds limit, const std::function<void()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

const char* const kEveryFamily[] = {
    "rmsnorm:hidden=4096,dtype=f16,residual=1",
    "gemm:n=4096,k=4096,fmt=awq4",
    "attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16",
    "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3",
    "attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=f16,q=4",
    "attention:op=kv_write,kv_heads=8,dim=128,page=16,kv=f16",
};

TEST(Tokens, EveryFamilyTakesAnyTokenCountUpTo2To31) {
  // pow2_ceil looped forever on values above 2^30 (its int doubled past INT_MAX).
  const bool finished = finishes_within(std::chrono::seconds(20), [] {
    for (const char* spec : kEveryFamily) {
      const Family& f = family_of(spec);
      for (Arch arch : {Arch{70}, Arch{90}}) {
        for (int64_t m : {(int64_t(1) << 30) + 1, kMaxTokens}) {
          std::string c;
          EXPECT_NO_THROW(c = f.default_config(spec, m, arch)) << spec << " m=" << m;
          EXPECT_NO_THROW(f.fits_bucket(spec, c, m)) << spec << " m=" << m;
        }
      }
    }
  });
  EXPECT_TRUE(finished) << "a default config for a token count above 2^30 did not come back within 20 s";
}

TEST(Tokens, EveryFamilyRejectsTokenCountsOutOfRange) {
  const bool finished = finishes_within(std::chrono::seconds(20), [] {
    for (const char* spec : kEveryFamily) {
      SCOPED_TRACE(spec);
      const Family& f = family_of(spec);
      const std::string c = f.default_config(spec, 1, Arch{70});
      for (int64_t m : {int64_t(0), int64_t(-3), kMaxTokens + 1}) {
        expect_throw<InputError>([&] { f.default_config(spec, m, Arch{70}); }, {"token count m=" + std::to_string(m)});
        expect_throw<InputError>([&] { f.fits_bucket(spec, c, m); }, {"token count m=" + std::to_string(m)});
      }
    }
  });
  EXPECT_TRUE(finished) << "an out-of-range token count was accepted or hung (details above)";
}

}  // namespace
}  // namespace onecat
