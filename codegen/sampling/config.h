// sampling config: what the tuner varies.
//   op=sample:  threads=512,cap=1024
//   op=argmax:  threads=256,vec=4,unroll=4,split=1
// sample: one CTA of `threads` per row; `cap` tokens fit the shared-memory list the
// selections sort (more candidates take the multi-pass path). argmax: `split` CTAs per row
// (a partial each, merged by the last), `vec` floats per load (4 needs vocab % 4 == 0),
// `unroll` loads in flight per thread.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/sampling/spec.h"

namespace onecat::sampling {

struct Config {
  // Volta's opt-in shared-memory limit per CTA (VOLTA.md: 96 KB per SM); the sm_90 limit is
  // larger, so one bound serves every target.
  static constexpr int kMaxSharedBytes = 96 * 1024;
  static constexpr int kMinThreads = 64, kMaxThreads = 1024;
  static constexpr int kMinCap = 32, kMaxCap = 4096;
  static constexpr int kMaxSplit = 64;
  // The sample kernel's shared memory beside its THREADS slots and CAP list entries (8 bytes
  // each) and the bitmap: two 256-bin histograms of counts and masses and a few scalars
  // (templates/sampling/sample.cuh SampleShared, which static_asserts this bound).
  static constexpr int kSampleFixedShared = 10368;

  Op op = Op::kSample;
  int threads = 512;
  int cap = 1024;                      // sample
  int vec = 1, unroll = 4, split = 1;  // argmax

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;
  int shared_bytes(const Spec& spec) const;  // dynamic shared memory of one CTA
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::sampling
