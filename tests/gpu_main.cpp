// GPU tests: without a usable GPU they print why and exit 77, which ctest reports as
// skipped (SKIP_RETURN_CODE), so CI without a GPU stays honest about what it ran.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/cuda/driver.h"

int main(int argc, char** argv) {
  std::string reason = onecat::Driver::unavailable_reason();
  if (!reason.empty()) {
    std::printf("SKIP: GPU tests need an NVIDIA GPU: %s\n", reason.c_str());
    return 77;
  }
  onecat::use_device(0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
