// Kernels written but not yet run on a GPU stay out of the family defaults and the tuning
// candidates unless ONECAT_UNVERIFIED=1 (the GPU test binary sets it, bench/device.sh passes
// it on): a kernel no GPU has checked must not reach a user's `onecat tune` or dispatch, where
// a fault would end the process. An explicit config still compiles and runs (onecat check,
// bench --config). Where it is used today: the attention family's atom=m16n8k16 (sm_80+).
// (The gemm family's tc_small, pipe=2 and LOP3 int4 decode left it after passing the GPU
// tests on the H200, 2026-11-29.)
#pragma once
#include <cstdlib>
#include <cstring>

namespace onecat {

inline bool unverified_kernels() {
  const char* v = std::getenv("ONECAT_UNVERIFIED");
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace onecat
