#include "codegen/moe/space.h"

#include <algorithm>

#include "base/error.h"
#include "codegen/moe/emit.h"

namespace onecat::moe {
namespace {

// Pairs per touched expert when m tokens spread evenly over the experts (at least one).
int64_t pairs_per_expert(const Spec& spec, int64_t m) {
  const int64_t pairs = m * spec.topk;
  return std::max<int64_t>(1, (pairs + spec.experts - 1) / spec.experts);
}

// The even share of pairs per expert from which the default takes strategy=mma: a 16-row
// tensor-core tile at least half full.
constexpr int64_t kMmaShare = 8;

}  // namespace

Config default_config(const Spec& spec, int64_t m, Arch arch) {
  Config c;
  c.op = spec.op;
  if (spec.op == Op::kRoute) {
    // Up to 64 tokens, one CTA with a warp per token (no workspace round trip); beyond, CTAs
    // of 8 warps over 16 to 64 tokens each, about 128 of them for 4096 tokens.
    c.tokens = 1;
    if (m <= 64) {
      while (c.tokens < m) c.tokens *= 2;
      c.threads = int(std::clamp<int64_t>(32 * c.tokens, 128, 1024));
    } else {
      while (c.tokens < std::min<int64_t>(m / 128, 64)) c.tokens *= 2;
      c.tokens = std::max(c.tokens, 16);
      c.threads = 256;
    }
    while (c.tokens > 1 && c.tokens * spec.topk > Config::kMaxRoutePairs) c.tokens /= 2;
    while (c.threads > 32 && c.invalid_reason(spec)) c.threads /= 2;
    return c;
  }
  if (spec.op == Op::kCombine) {
    c.threads = spec.hidden >= 1024 ? 256 : 128;
    return c;
  }
  // Prefill (an expert gets a tensor-core tile's worth of pairs on average): strategy=mma,
  // 128 weight rows, tiles of 32 pairs from 16 per expert, of 64 from 64 per expert, there
  // with two warps (each a 32 × 128 tile) from sm_80 — on the H200 the Qwen3-30B-A3B layer's
  // fastest or within 6 % of it in f16 and awq4 at 256 and 4096 tokens (bench/RESULTS.md); on
  // sm_70 such a warp's accumulators spill, so four warps of 32 × 64.
  const int64_t share = pairs_per_expert(spec, m);
  if (share >= kMmaShare) {
    c.strategy = Strategy::kMma;
    c.bn = 128;
    if (share >= 64) {
      c.bm = 64, c.wm = 2, c.wn = arch.sm >= 80 ? 1 : 2;
    } else if (share >= 16) {
      c.bm = 32, c.wm = 1, c.wn = 4;
    } else {
      c.bm = 16, c.wm = 1, c.wn = 2;
    }
    if (!c.invalid_reason(spec)) return c;
    c.strategy = Strategy::kGemv;  // k not a multiple of 32, say: the gemv serves any shape
  }
  // Decode: tiles of one pair while the experts get fewer pairs than one each on average, then
  // up to twice the share (routing is skewed: some experts get several); 8 rows (16-byte chunks
  // of 8 or 16 weight rows in flight per lane: the fastest on the H200 at 1 and 16 tokens), 4
  // for gate_up's tiles of several pairs (8 spill there in the 4-bit float formats); warps
  // enough for about two chunks per lane.
  c.mt = 1;
  const int64_t pairs = m * spec.topk;
  if (pairs >= spec.experts) {
    while (c.mt * 2 <= std::min<int64_t>(2 * share, 8)) c.mt *= 2;
  }
  c.rows = spec.op == Op::kGateUp && c.mt > 1 ? 4 : 8;
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
      if (c.op != Op::kRoute) {
        if (!c.invalid_reason(spec)) out.push_back(c);
        continue;
      }
      for (int tokens : {1, 2, 4, 8, 16, 32, 64, 128}) {
        c.tokens = tokens;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
    return out;
  }
  for (int mt : {1, 2, 4, 8, 16}) {
    for (int rows : {1, 2, 4, 8, 16}) {
      for (int warps : {1, 2, 4, 8}) {
        c.mt = mt, c.rows = rows, c.warps = warps;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
  }
  // Decode's tiles of one or two pairs: CTAs that walk 2 to 8 groups of rows (the tile search
  // and a CTA's start paid once for more weight bytes).
  for (int mt : {1, 2}) {
    for (int rows : {4, 8}) {
      for (int warps : {1, 2, 4}) {
        for (int loop : {2, 4, 8}) {
          c.mt = mt, c.rows = rows, c.warps = warps, c.loop = loop;
          if (!c.invalid_reason(spec)) out.push_back(c);
        }
      }
    }
  }
  c.loop = 1;
  c.strategy = Strategy::kMma;
  for (int bm : {16, 32, 64, 128}) {
    for (int bn : {64, 128, 256}) {
      for (int wm : {1, 2, 4}) {
        for (int wn : {1, 2, 4}) {
          c.bm = bm, c.bn = bn, c.wm = wm, c.wn = wn;
          if (wm * wn >= 2 && !c.invalid_reason(spec)) out.push_back(c);
        }
      }
    }
  }
  return out;
}

bool fits_bucket(const Spec& spec, const Config& c, int64_t m) {
  // route: no CTA sized for more than twice the bucket's tokens (its warps would idle), and
  // CTAs of four tokens or more on average (the last CTA's pass over every CTA's counts grows
  // with their number).
  if (c.op == Op::kRoute) return c.tokens <= std::max<int64_t>(1, 2 * m) && c.route_ctas(m) <= std::max<int64_t>(1, m / 4);
  if (!c.projection()) return true;
  // Tiles up to twice the even share (skewed routing fills some experts more), never more
  // pairs than the bucket has; tensor-core tiles from half the share at which the default
  // takes them.
  const int64_t share = pairs_per_expert(spec, m);
  if (max_tiles(spec, c, m * spec.topk) > 65535) return false;  // past the grid's y limit (geometry refuses it)
  if (c.mma()) return share * 2 >= kMmaShare && c.bm <= std::max<int64_t>(16, 2 * share);
  return c.mt <= std::max<int64_t>(1, std::min<int64_t>(2 * share, m * spec.topk));
}

}  // namespace onecat::moe
