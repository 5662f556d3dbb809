#include "codegen/sampling/space.h"

#include <algorithm>

#include "codegen/tokens.h"
#include "base/error.h"

namespace onecat::sampling {
namespace {

// The default argmax splits a few rows until about this many CTAs share the work: two per SM
// of an 80-SM V100 (and near one per SM of a 132-SM H200), so small batches still stream the
// logits at full bandwidth.
constexpr int64_t kArgmaxTargetCtas = 160;
// Candidates with more CTAs than this multiple of the target are not worth timing.
constexpr int64_t kArgmaxMaxCtas = 4 * kArgmaxTargetCtas;

Config checked(const Spec& spec, Config c) {
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid config: " + *why);
  return c;
}

}  // namespace

Config default_config(const Spec& spec, int64_t m) {
  Config c;
  c.op = spec.op;
  if (spec.op == Op::kSample) {
    // 512 threads and a 1024-entry list: the shared memory of a 262144-token vocabulary
    // still fits under 48 KiB plus the bitmap.
    c.threads = 512;
    c.cap = 1024;
    return checked(spec, c);
  }
  c.threads = 256;
  c.vec = spec.vocab % 4 == 0 ? 4 : 1;
  c.unroll = 4;
  c.split = int(std::clamp<int64_t>(pow2_ceil((kArgmaxTargetCtas + m - 1) / m), 1, Config::kMaxSplit));
  while (c.split > 1 && c.invalid_reason(spec)) c.split /= 2;
  while (c.threads > Config::kMinThreads && c.invalid_reason(spec)) c.threads /= 2;
  return checked(spec, c);
}

std::vector<Config> candidate_configs(const Spec& spec) {
  std::vector<Config> out;
  if (spec.op == Op::kSample) {
    for (int threads : {256, 512, 1024}) {
      for (int cap : {512, 1024, 2048}) {
        Config c;
        c.threads = threads;
        c.cap = cap;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
    return out;
  }
  for (int threads : {128, 256, 512}) {
    for (int vec : {4, 1}) {
      for (int unroll : {2, 4, 8}) {
        for (int split = 1; split <= Config::kMaxSplit; split *= 2) {
          Config c;
          c.op = Op::kArgmax;
          c.threads = threads;
          c.vec = vec;
          c.unroll = unroll;
          c.split = split;
          if (!c.invalid_reason(spec)) out.push_back(c);
        }
      }
      if (spec.vocab % 4 == 0) break;  // vec=1 only where vec=4 cannot run
    }
  }
  return out;
}

bool fits_bucket(const Spec& spec, const Config& c, int64_t m) {
  if (spec.op == Op::kSample) return true;
  return c.split == 1 || m * c.split <= kArgmaxMaxCtas;
}

}  // namespace onecat::sampling
