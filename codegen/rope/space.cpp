#include "codegen/rope/space.h"

#include <algorithm>
#include <optional>
#include <string>

#include "codegen/tokens.h"
#include "base/error.h"

namespace onecat::rope {
namespace {

constexpr int kThreadCounts[] = {64, 128, 256, 512};
constexpr int kTokenCounts[] = {1, 2, 4, 8};
// The default CTA takes one token with a thread per lane of its heads, up to this many (Llama
// and Qwen shapes at tp=1: 48 heads × 8 lanes = 384 in two passes). Not 512: with 512 threads
// ptxas (NVRTC 12.8, sm_90) spilled 4 bytes of the qk_norm + fp8-cache kernel at 40 registers.
constexpr int kDefaultMaxThreads = 256;
constexpr int kDefaultMinThreads = 64;

}  // namespace

Config default_config(const Spec& spec, int64_t) {
  std::optional<std::string> why;
  for (int vec : {8, 4, 2, 1}) {
    Config c;
    c.vec = vec;
    c.tokens = 1;
    if ((spec.dim / 2) % vec != 0) continue;
    c.threads = int(
        std::clamp<int64_t>(pow2_ceil(int64_t(spec.slots()) * c.lanes(spec)), kDefaultMinThreads, kDefaultMaxThreads));
    why = c.invalid_reason(spec);
    if (!why) return c;
  }
  throw InputError(spec.to_string() + " has no valid config: " + why.value_or("no vector width divides dim/2"));
}

std::vector<Config> candidate_configs(const Spec& spec) {
  std::vector<Config> out;
  for (int vec : {8, 4, 2}) {
    for (int threads : kThreadCounts) {
      for (int tokens : kTokenCounts) {
        Config c{vec, threads, tokens};
        // More threads than a CTA's tokens have lanes only idle.
        if (threads > std::max<int64_t>(64, pow2_ceil(int64_t(tokens) * spec.slots() * (spec.dim / 2 / vec)))) continue;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
  }
  if (out.empty()) out.push_back(default_config(spec, 1));
  return out;
}

bool fits_bucket(const Spec&, const Config& c, int64_t m) { return c.tokens <= pow2_ceil(m); }

}  // namespace onecat::rope
