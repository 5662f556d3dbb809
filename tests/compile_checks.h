// The static-quality tests' common step: compile a batch of kernels and expect each to build
// without spills (and, where asked, without a stack frame).
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "runtime/jit/compiler.h"
#include "runtime/jit/service.h"

namespace onecat::test {

// Compiles reqs two at a time (no cache); a compile error stops the check (call it inside
// ASSERT_NO_FATAL_FAILURE to stop the test too).
inline void expect_compile_without_spills(const std::vector<CompileRequest>& reqs, bool no_stack) {
  JitService jit(nullptr);
  const std::vector<CompileResult> results = jit.get_all(reqs, 2, Parallelism::kThreads);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(reqs[i].spec + " [" + reqs[i].config + "] " + reqs[i].arch.name());
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    EXPECT_FALSE(results[i].binary.usage.spills()) << results[i].binary.usage.spill_store_bytes << " bytes spilled";
    if (no_stack) {
      EXPECT_EQ(results[i].binary.usage.stack_bytes, 0);
    }
  }
}

}  // namespace onecat::test
