#include "codegen/moe/space.h"

#include <algorithm>

#include "base/error.h"

namespace onecat::moe {
namespace {

// Pairs per touched expert when m tokens spread evenly over the experts (at least one).
int64_t pairs_per_expert(const Spec& spec, int64_t m) {
  const int64_t pairs = m * spec.topk;
  return std::max<int64_t>(1, (pairs + spec.experts - 1) / spec.experts);
}

}  // namespace

Config default_config(const Spec& spec, int64_t m) {
  Config c;
  c.op = spec.op;
  if (spec.op == Op::kRoute) {
    // A warp per token while there are few; the grouping pass is one warp's either way.
    c.threads = m <= 4 ? 128 : m <= 32 ? 256 : 1024;
    while (c.threads > 32 && c.invalid_reason(spec)) c.threads /= 2;
    return c;
  }
  if (spec.op == Op::kCombine) {
    c.threads = spec.hidden >= 1024 ? 256 : 128;
    return c;
  }
  // Tiles as large as the pairs an expert gets on average (decode: one), rows as the gemm
  // family's gemv takes them, and warps enough for about two chunks per lane.
  c.mt = 1;
  while (c.mt < std::min<int64_t>(pairs_per_expert(spec, m), 8)) c.mt *= 2;
  c.rows = c.mt == 1 ? 4 : 2;
  const gemm::Spec g = spec.projection();
  const int64_t chunks = g.k / g.per_chunk();
  c.warps = int(std::clamp<int64_t>(chunks / 64, 1, 8));
  while (c.warps > 1 && c.invalid_reason(spec)) --c.warps;
  while (c.rows > 1 && c.invalid_reason(spec)) c.rows /= 2;
  while (c.mt > 1 && c.invalid_reason(spec)) c.mt /= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid gemv config: " + *why);
  return c;
}

std::vector<Config> candidate_configs(const Spec& spec) {
  std::vector<Config> out;
  Config c;
  c.op = spec.op;
  if (!c.projection()) {
    for (int t : {64, 128, 256, 512, 1024}) {
      c.threads = t;
      if (!c.invalid_reason(spec)) out.push_back(c);
    }
    return out;
  }
  for (int mt : {1, 2, 4, 8, 16}) {
    for (int rows : {1, 2, 4, 8}) {
      for (int warps : {1, 2, 4, 8}) {
        c.mt = mt, c.rows = rows, c.warps = warps;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
  }
  return out;
}

bool fits_bucket(const Spec& spec, const Config& c, int64_t m) {
  if (!c.projection()) return true;
  // Tiles up to twice the even share (skewed routing fills some experts more), never more
  // pairs than the bucket has.
  return c.mt <= std::max<int64_t>(1, std::min<int64_t>(2 * pairs_per_expert(spec, m), m * spec.topk));
}

}  // namespace onecat::moe
