// GPU tests: without a usable GPU they print why and exit 77, which ctest reports as
// skipped (SKIP_RETURN_CODE), so CI without a GPU stays honest about what it ran. With
// ONECAT_REQUIRE_GPU=1 (set on every GPU machine's run) a missing GPU is a failure instead,
// so a broken driver can never pass as "skipped".
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cuda/driver.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing the tests (ctest's discovery) needs no GPU.
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  std::string reason = onecat::Driver::unavailable_reason();
  if (!reason.empty()) {
    const char* require = std::getenv("ONECAT_REQUIRE_GPU");
    if (require && std::string(require) == "1") {
      std::printf("FAIL: ONECAT_REQUIRE_GPU=1, but the GPU tests cannot run: %s\n", reason.c_str());
      return 1;
    }
    std::printf("SKIP: GPU tests need an NVIDIA GPU: %s\n", reason.c_str());
    return 77;
  }
  onecat::use_device(0);
  return RUN_ALL_TESTS();
}
