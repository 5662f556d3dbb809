// embedding's typed op: out[t] = table[ids[t] − vocab_start] over `tokens` tokens, fp16 rows of
// `hidden`; an id outside [vocab_start, vocab_start + vocab) gives a zero row (another rank's
// slice under vocabulary parallelism, summed by the all-reduce; or a bad id).
#pragma once
#include <cstdint>

#include "codegen/embedding/config.h"
#include "codegen/embedding/spec.h"
#include "codegen/kernel_call.h"

namespace onecat::embedding {

struct Args {
  DevicePtr out = 0;    // [tokens][hidden] fp16
  DevicePtr table = 0;  // [vocab][hidden] fp16
  DevicePtr ids = 0;    // [tokens] int32
  int64_t vocab_start = 0;
  int64_t tokens = 0;
};

inline int64_t workspace_bytes(const Spec&, const Config&, int64_t) { return 0; }
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);

}  // namespace onecat::embedding
