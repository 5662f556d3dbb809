// ptxas resource reports as NVRTC 12.8 and 13.0 print them (-Xptxas -v / --ptxas-options=-v).
// The logs below are copied from real compiles, with the kernel names changed.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "runtime/jit/ptxas_report.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

const char* const kRms = "_ZN6onecat14rmsnorm_kernelILi4096ELb1ELi256ELi8ELi1EEEvPNS_6half_tEPKS1_S2_S4_fi";
const char* const kRmsOther = "_ZN6onecat14rmsnorm_kernelILi4096ELb0ELi128ELi8ELi2EEEvPNS_6half_tEPKS1_S2_S4_fi";

// NVRTC 12.8, sm_70: a deprecation warning, two entry functions, cmem lines.
const std::string kLog128 =
    "nvrtc: warning: Architectures prior to '<compute/sm>_75' are deprecated and may be removed in a future release\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function '" + std::string(kRmsOther) + "' for 'sm_70'\n"
    "ptxas info    : Function properties for " + kRmsOther + "\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 26 registers, used 1 barriers, 16 bytes smem, 368 bytes cmem[0]\n"
    "ptxas info    : Compile time = 3.412 ms\n"
    "ptxas info    : Compiling entry function '" + kRms + "' for 'sm_70'\n"
    "ptxas info    : Function properties for " + kRms + "\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 1 barriers, 32 bytes smem, 368 bytes cmem[0]\n"
    "ptxas info    : Compile time = 4.101 ms\n";

// NVRTC 13.0, sm_90: no cmem, a non-entry function's properties between the entries,
// and a kernel that spills.
const std::string kLog130 =
    "ptxas info    : Overriding maximum register limit 256 for '_Z6spillyPfi' with  32 of maxrregcount option\n"
    "ptxas info    : Overriding maximum register limit 256 for 'first' with  32 of maxrregcount option\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function '_Z6spillyPfi' for 'sm_90'\n"
    "ptxas info    : Function properties for _Z6spillyPfi\n"
    "ptxas         .     1216 bytes stack frame, 16 bytes spill stores, 24 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 0 barriers, 1216 bytes cumulative stack size\n"
    "ptxas info    : Compile time = 774.421 ms\n"
    "ptxas info    : Function properties for _Z6helperPfi\n"
    "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
    "ptxas info    : Compiling entry function 'first' for 'sm_90'\n"
    "ptxas info    : Function properties for first\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 8 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 1.871 ms\n";

TEST(PtxasReport, PicksTheEntryByLoweredName128) {
  ResourceUsage u = parse_ptxas_report(kLog128, kRms);
  EXPECT_EQ(u.registers, 40);
  EXPECT_EQ(u.barriers, 1);
  EXPECT_EQ(u.shared_bytes, 32);
  EXPECT_EQ(u.stack_bytes, 0);
  EXPECT_EQ(u.spill_store_bytes, 0);
  EXPECT_EQ(u.spill_load_bytes, 0);
  EXPECT_FALSE(u.spills());

  ResourceUsage other = parse_ptxas_report(kLog128, kRmsOther);
  EXPECT_EQ(other.registers, 26);
  EXPECT_EQ(other.shared_bytes, 16);
  EXPECT_EQ(other.barriers, 1);
}

TEST(PtxasReport, SpillsStackAndNoCmem130) {
  ResourceUsage spilly = parse_ptxas_report(kLog130, "_Z6spillyPfi");
  EXPECT_EQ(spilly.registers, 32);
  EXPECT_EQ(spilly.barriers, 0);
  EXPECT_EQ(spilly.shared_bytes, 0);
  EXPECT_EQ(spilly.stack_bytes, 1216);
  EXPECT_EQ(spilly.spill_store_bytes, 16);
  EXPECT_EQ(spilly.spill_load_bytes, 24);
  EXPECT_TRUE(spilly.spills());

  // The helper's properties (between the entries) belong to neither entry.
  ResourceUsage first = parse_ptxas_report(kLog130, "first");
  EXPECT_EQ(first.registers, 8);
  EXPECT_EQ(first.stack_bytes, 0);
  EXPECT_EQ(first.spill_store_bytes, 0);
  EXPECT_EQ(first.spill_load_bytes, 0);
  EXPECT_FALSE(first.spills());
}

TEST(PtxasReport, OnlyEntryWhenNameIsEmpty) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_70'\n"
      "ptxas info    : Function properties for _Z3fooPf\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers, 356 bytes cmem[0]\n";
  ResourceUsage u = parse_ptxas_report(log, "");
  EXPECT_EQ(u.registers, 12);
  EXPECT_EQ(u.shared_bytes, 0);
  EXPECT_EQ(parse_ptxas_report(log, "_Z3fooPf").registers, 12);
}

TEST(PtxasReport, NamesThatShareAPrefixAreKeptApart) {
  const std::string log =
      "ptxas info    : Compiling entry function '_Z1kILi10EEvv' for 'sm_70'\n"
      "ptxas info    : Function properties for _Z1kILi10EEvv\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 20 registers, used 0 barriers, 356 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z1kILi1EEvv' for 'sm_70'\n"
      "ptxas info    : Function properties for _Z1kILi1EEvv\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 0 barriers, 356 bytes cmem[0]\n";
  EXPECT_EQ(parse_ptxas_report(log, "_Z1kILi10EEvv").registers, 20);
  EXPECT_EQ(parse_ptxas_report(log, "_Z1kILi1EEvv").registers, 10);
}

TEST(PtxasReport, MissingReportIsAnError) {
  // A name the log does not mention.
  test::expect_throw<Error>([] { parse_ptxas_report(kLog128, "_Z7missingv"); },
                            {"no ptxas resource report for _Z7missingv", "--ptxas-options=-v"});
  // A log without -v: only NVRTC's warning.
  test::expect_throw<Error>(
      [] {
        parse_ptxas_report(
            "nvrtc: warning: Architectures prior to '<compute/sm>_75' are deprecated and may be removed in a future "
            "release\n",
            kRms);
      },
      {"no ptxas resource report", kRms});
  test::expect_throw<Error>([] { parse_ptxas_report("", ""); }, {"no ptxas resource report for the kernel"});
  // Properties without the "Used" line are not a report.
  test::expect_throw<Error>(
      [] {
        parse_ptxas_report(
            "ptxas info    : Function properties for _Z3fooPf\n"
            "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
            "_Z3fooPf");
      },
      {"no ptxas resource report for _Z3fooPf"});
}

TEST(PtxasReport, DefaultUsageMeansUnknownRegisters) {
  ResourceUsage u;
  EXPECT_EQ(u.registers, -1);
  EXPECT_FALSE(u.spills());
  u.spill_load_bytes = 4;
  EXPECT_TRUE(u.spills());
}

}  // namespace
}  // namespace onecat
