// NVRTC discovery: the pinned 12.8 for sm_70, a library for sm_90, and the sentences a
// person gets when ONECAT_NVRTC is wrong or the NVRTC cannot target the arch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "runtime/cuda/nvrtc.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::contains;
using test::expect_throw;
using test::ScopedEnv;

const char* const kCuda13Nvrtc = "/usr/local/cuda/lib64/libnvrtc.so.13";

// The registry as the process sees it without ONECAT_NVRTC.
const NvrtcRegistry& default_registry() {
  static const NvrtcRegistry* reg = [] {
    ScopedEnv clear("ONECAT_NVRTC", std::nullopt);
    return &NvrtcRegistry::get();
  }();
  return *reg;
}

TEST(Nvrtc, FindsLibrariesForSm70AndSm90) {
  const NvrtcRegistry& reg = default_registry();
  ASSERT_FALSE(reg.libraries().empty()) << "no NVRTC found; run scripts/setup";
  for (const auto& lib : reg.libraries()) {
    SCOPED_TRACE(lib->path());
    EXPECT_TRUE(std::filesystem::exists(lib->path()));
    EXPECT_GE(lib->major(), 11);
    EXPECT_EQ(lib->version(), std::to_string(lib->major()) + "." + std::to_string(lib->minor()));
    ASSERT_FALSE(lib->archs().empty());
    EXPECT_TRUE(std::is_sorted(lib->archs().begin(), lib->archs().end()));
    EXPECT_TRUE(lib->archs_text().starts_with("sm_" + std::to_string(lib->archs().front())));
    for (int a : lib->archs()) EXPECT_EQ(lib->supports(Arch{a}), true);
    EXPECT_FALSE(lib->supports(Arch{1}));
  }
  // Every library loaded appears in searched() with an empty reason.
  size_t used = std::count_if(reg.searched().begin(), reg.searched().end(), [](const auto& s) { return s.second.empty(); });
  EXPECT_EQ(used, reg.libraries().size());

  const NvrtcLib& for70 = reg.for_arch(Arch{70});
  EXPECT_TRUE(for70.supports(Arch{70}));
  EXPECT_EQ(for70.major(), 12) << "sm_70 needs CUDA 12's NVRTC: " << for70.path();
  EXPECT_EQ(for70.version(), "12.8") << "the pinned NVRTC comes first: " << for70.path();

  const NvrtcLib& for90 = reg.for_arch(Arch{90});
  EXPECT_TRUE(for90.supports(Arch{90}));
  // The same object is returned on every call (discovery happens once).
  EXPECT_EQ(&NvrtcRegistry::get(), &reg);
}

TEST(Nvrtc, LoadRejectsWhatIsNotAnNvrtc) {
  expect_throw<Error>([] { NvrtcLib::load("/nonexistent/libnvrtc.so.12"); }, {"/nonexistent/libnvrtc.so.12"});
  // A real library that is not NVRTC: libsqlite3 is linked into this binary.
  expect_throw<Error>([] { NvrtcLib::load("libsqlite3.so.0"); }, {"symbol nvrtcGetErrorString is missing"});
}

TEST(Nvrtc, BadOnecatNvrtcIsExplained) {
  const std::string bad = "/nonexistent/libnvrtc.so.12";
  ScopedEnv env("ONECAT_NVRTC", bad);
  NvrtcRegistry reg = NvrtcRegistry::discover();
  EXPECT_TRUE(reg.libraries().empty());
  ASSERT_EQ(reg.searched().size(), 1u) << "ONECAT_NVRTC is used alone";
  EXPECT_EQ(reg.searched()[0].first, bad);
  EXPECT_FALSE(reg.searched()[0].second.empty());
  std::string msg = expect_throw<Error>([&] { reg.for_arch(Arch{70}); },
                                        {"ONECAT_NVRTC=" + bad, "cannot be loaded", "unset it"});
  EXPECT_TRUE(contains(msg, "No such file")) << "the loader's reason is kept: " << msg;
}

TEST(Nvrtc, OnecatNvrtcPointingAtAnotherLibraryIsExplained) {
  ScopedEnv env("ONECAT_NVRTC", "libsqlite3.so.0");
  NvrtcRegistry reg = NvrtcRegistry::discover();
  EXPECT_TRUE(reg.libraries().empty());
  expect_throw<Error>([&] { reg.for_arch(Arch{70}); }, {"ONECAT_NVRTC=libsqlite3.so.0", "nvrtcGetErrorString"});
}

TEST(Nvrtc, UnsupportedArchNamesTheArchTheVersionAndWhatToDo) {
  const std::string path = default_registry().for_arch(Arch{70}).path();
  ScopedEnv env("ONECAT_NVRTC", path);
  NvrtcRegistry reg = NvrtcRegistry::discover();
  ASSERT_EQ(reg.libraries().size(), 1u);
  const NvrtcLib& lib = *reg.libraries()[0];
  ASSERT_EQ(lib.version(), "12.8");
  EXPECT_EQ(&reg.for_arch(Arch{70}), &lib);

  // An arch this NVRTC does not list: sm_110 where absent, else the next one up that is.
  int missing = 110;
  while (lib.supports(Arch{missing})) ++missing;
  ASSERT_FALSE(lib.supports(Arch{missing}));
  const std::string arch = "sm_" + std::to_string(missing);
  std::string msg = expect_throw<Error>([&] { reg.for_arch(Arch{missing}); },
                                        {"cannot target " + arch, "NVRTC 12.8", path, "sm_70", "ONECAT_NVRTC"});
  // CUDA 12.8's NVRTC is the one here: installing it is no advice.
  EXPECT_FALSE(contains(msg, kPinnedNvrtcPackage)) << msg;

  // An arch newer than any NVRTC here knows needs a newer NVRTC, not the pinned one.
  msg = expect_throw<Error>([&] { reg.for_arch(Arch{999}); },
                            {"cannot target sm_999", "NVRTC 12.8", "newer than every arch", "ONECAT_NVRTC"});
  EXPECT_FALSE(contains(msg, kPinnedNvrtcPackage)) << msg;
}

TEST(Nvrtc, Cuda13CannotTargetVolta) {
  if (!std::filesystem::exists(kCuda13Nvrtc)) GTEST_SKIP() << kCuda13Nvrtc << " is not installed";
  ScopedEnv env("ONECAT_NVRTC", kCuda13Nvrtc);
  NvrtcRegistry reg = NvrtcRegistry::discover();
  ASSERT_EQ(reg.libraries().size(), 1u) << reg.searched()[0].second;
  const NvrtcLib& lib = *reg.libraries()[0];
  EXPECT_EQ(lib.major(), 13);
  EXPECT_FALSE(lib.supports(Arch{70}));
  EXPECT_TRUE(lib.supports(Arch{90}));
  EXPECT_EQ(&reg.for_arch(Arch{90}), &lib);
  expect_throw<Error>([&] { reg.for_arch(Arch{70}); },
                      {"cannot target sm_70", "NVRTC " + lib.version(), "NVRTC 13.", kPinnedNvrtcPackage});
}

}  // namespace
}  // namespace onecat
