#include "codegen/moe/space.h"

#include <algorithm>
#include <bit>
#include <optional>

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

// sm_80+, from as many pairs as experts (16 tokens on Qwen3-30B-A3B's layer) while an expert
// gets up to kTcMaxShare pairs on average: tc_small, each weight chunk decoded once for a tile
// of 8 pairs (16 from 8 per expert), where the gemv decodes it once per pair and the mma tile
// (the wmma code path) is slow on sm_80+. In the H100 sweeps of that layer (bench/RESULTS.md) it
// was the fastest projection in awq4, nvfp4, fp8b128 and f16 at 64, 256 and 1024 tokens but
// nvfp4's down at 1024 (1.1–1.9× faster than the gemv at 64 tokens, than the mma tile at 256)
// and within 5 % of the gemv at 16; below one pair per expert the gemv's one-pair tiles win. Tiles of 8 pairs: 16 output
// rows for gate_up (32 weight rows), 32 for down, warps enough that each takes about six
// k-blocks of four chunks (the sweep's best: 4-bit gate_up 2, down 1; fp8b128 4 and 2; f16 4
// and 4), weights straight into registers. Tiles of 16: the 4-bit formats twice the rows on
// one warp with the weights through the three-slot cp.async ring (the registers go to the
// second 8-pair operand), the others two warps with registers.
constexpr int64_t kTcMaxShare = 64;

std::optional<Config> tc_small_default(const Spec& spec, int64_t m, Arch arch) {
  const int64_t pairs = m * spec.topk;
  const int64_t share = pairs_per_expert(spec, m);
  if (!arch.has_mma_m16n8k16() || pairs < spec.experts || share > kTcMaxShare) return std::nullopt;
  Config c;
  c.op = spec.op;
  c.strategy = Strategy::kTcSmall;
  c.mt = 2 * share >= 16 ? 16 : 8;
  c.rows = spec.op == Op::kGateUp ? 16 : 32;
  const gemm::Spec g = spec.projection();
  const int64_t blocks = (g.k / g.per_chunk() + 3) / 4;
  c.warps = int(std::bit_floor(uint64_t(std::clamp<int64_t>(blocks / 6, 1, 4))));
  c.stages = 1;
  if (c.mt == 16) {
    const bool four_bit = g.per_chunk() >= 32;
    c.rows *= four_bit ? 2 : 1;
    c.warps = four_bit ? 1 : std::min(c.warps, 2);
    c.stages = four_bit ? 3 : 1;
  }
  while (c.rows > 16 && c.invalid_reason(spec)) c.rows /= 2;
  while (c.warps > 1 && c.invalid_reason(spec)) c.warps /= 2;
  while (c.stages > 1 && c.invalid_reason(spec)) --c.stages;
  while (c.mt > 8 && c.invalid_reason(spec)) c.mt /= 2;
  if (c.invalid_reason(spec)) return std::nullopt;  // K not whole 16-byte chunks, say: the gemv serves it
  return c;
}

// The gemv's warps over rows of `chunks` 16-byte chunks: one warp per `per_lane` chunks (32:
// about one chunk a lane), 1 to 8, a power of two.
int gemv_warps(int64_t chunks, int64_t per_lane) {
  return int(std::bit_floor(uint64_t(std::clamp<int64_t>(chunks / per_lane, 1, 8))));
}

// One warp's lane groups over rows of `chunks` chunks: as many as leave each lane whole chunks,
// where 32 does not divide them and that is at most 4 chunks a lane; else 1.
int gemv_lane_groups(int64_t chunks) {
  int lanes = 16;
  while (lanes > 1 && chunks % lanes != 0) lanes /= 2;
  return chunks % 32 != 0 && chunks / lanes <= 4 ? 32 / lanes : 1;
}

// op=decode: warps as the gemv default gives each projection (about a 16-byte chunk a lane),
// the fewer of the two (one CTA size serves both); 8 rows of h (16 weight rows; 4 with 4-bit
// weights, which kept the kernel at 128 registers where 8 took 216: the H100 sweep's best in
// awq4 and nvfp4 at one token, 1.15-1.25x faster) and 16 of y a CTA, and on one warp the down
// CTAs in lane groups where a row's chunks leave lanes idle (bench/RESULTS.md).
Config decode_default(const Spec& spec) {
  Config c;
  c.op = Op::kDecode;
  auto warps_for = [&](Op which) {
    const gemm::Spec g = spec.projection(which);
    return gemv_warps(g.k / g.per_chunk(), 32);
  };
  c.warps = std::min(warps_for(Op::kGateUp), warps_for(Op::kDown));
  c.rows = spec.projection(Op::kGateUp).per_chunk() >= 32 ? 4 : 8;
  c.down_rows = 16, c.groups = 1;
  while (c.warps > 1 && c.invalid_reason(spec)) c.warps /= 2;
  const gemm::Spec down = spec.projection(Op::kDown);
  if (c.warps == 1) c.groups = gemv_lane_groups(down.k / down.per_chunk());
  // int4 with zero points (awq4, gptq4: one decode, FmtInt4): twice the groups, half the lanes
  // each. The H100 sweeps' best at one token in two calls (awq4, Qwen3-30B-A3B's layer: 15.2
  // and 15.3 µs against 17.5 and 17.2 with the groups above); nvfp4 kept those (16.2 against
  // 19.0 with twice as many).
  const bool int4 = quant::is_int4(spec.format);
  if (c.warps == 1 && c.groups > 1 && int4) c.groups *= 2;
  while (c.groups > 1 && c.invalid_reason(spec)) c.groups /= 2;
  while (c.down_rows > 1 && c.invalid_reason(spec)) c.down_rows /= 2;
  while (c.rows > 1 && c.invalid_reason(spec)) c.rows /= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid config: " + *why);
  return c;
}

}  // namespace

int64_t decode_max_tokens(const Spec& spec) { return std::max<int64_t>(1, spec.experts / spec.topk); }

int64_t decode_layer_tokens(const Spec& spec) {
  const gemm::Spec up = spec.projection(Op::kGateUp);
  return up.per_chunk() >= 32 ? 1 : 0;  // 32 values a 16-byte chunk: the 4-bit formats
}

Config default_config(const Spec& spec, int64_t m, Arch arch) {
  if (spec.op == Op::kDecode) return decode_default(spec);
  Config c;
  c.op = spec.op;
  if (spec.op == Op::kRoute) {
    // Up to 32 tokens, one CTA with a warp per token (no workspace round trip); beyond, CTAs of
    // a warp per token over about √m tokens each (8 to 32), as many CTAs: on the H100 the
    // fastest route of Qwen3-30B-A3B's layer at 64, 256 and 1024 tokens, where one CTA at 64
    // tokens and CTAs of 8 warps over 16 tokens beyond took 1.15–1.65× as long (the CTA's
    // grouping pass and a warp's several tokens are serial; bench/RESULTS.md); 128 CTAs of 32
    // at 4096 tokens.
    c.tokens = 1;
    if (m <= 32) {
      while (c.tokens < m) c.tokens *= 2;
      c.threads = int(std::clamp<int64_t>(32 * c.tokens, 128, 1024));
    } else {
      while (c.tokens < 32 && int64_t(c.tokens) * c.tokens < m) c.tokens *= 2;
      c.tokens = std::max(c.tokens, 8);
      c.threads = 32 * c.tokens;
    }
    while (c.tokens > 1 && c.tokens * spec.topk > Config::kMaxRoutePairs) c.tokens /= 2;
    while (c.threads > 32 && c.invalid_reason(spec)) c.threads /= 2;
    return c;
  }
  if (spec.op == Op::kCombine) {
    // A CTA per token: up to 64 tokens the few CTAs take two values a thread (1024 threads
    // for hidden 2048, about 15 % faster than 256 on the H100 at 1 to 64 tokens: a lone
    // token's CTA is latency, not bandwidth); beyond, 256 (128 for narrow rows), within 3 % of
    // the sweep's best at 256 and 1024 tokens.
    c.threads = m <= 64 ? int(std::clamp<uint64_t>(std::bit_floor(uint64_t(std::max<int64_t>(spec.hidden / 2, 1))), 128, 1024))
                        : spec.hidden >= 1024 ? 256 : 128;
    return c;
  }
  // Prefill (an expert gets a tensor-core tile's worth of pairs on average): strategy=mma,
  // 128 weight rows, tiles of 32 pairs from 16 per expert, of 64 from 64 per expert, there
  // with two warps (each a 32 × 128 tile) from sm_80 — on the H200 the Qwen3-30B-A3B layer's
  // fastest or within 6 % of it in f16 and awq4 at 256 and 4096 tokens (bench/RESULTS.md); on
  // sm_70 such a warp's accumulators spill, so four warps of 32 × 64.
  const int64_t share = pairs_per_expert(spec, m);
  if (auto tc = tc_small_default(spec, m, arch)) return *tc;
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
  // Decode, from the H100 sweep of the Qwen3-30B-A3B layer at 1, 4 and 16 tokens
  // (bench/RESULTS.md). Tiles of one pair while the experts get fewer pairs than one each on
  // average; from there 16-bit weights take tiles up to twice the share (routing is skewed:
  // some experts get several), one conversion per chunk serving them all, while the decoded
  // formats keep one pair a tile: a second pair's sums and x took the 4-bit down kernel to 218
  // registers (8 warps an SM) and lost 15-45 %. 8 rows (4 for gate_up's tiles of several pairs,
  // where 8 spill in the 4-bit float formats). Warps: about one 16-byte chunk a lane while the
  // grid is small, two once it has kManyCtas CTAs. Then CTAs of `loop` groups of rows, up to
  // kLoopBytes of weights, while kLoopCtas CTAs remain: a CTA's start and tile search paid once
  // for more bytes (the 4-bit down projection's 3-KB groups: 1.5x faster at 4 and 16 tokens).
  constexpr int64_t kManyCtas = 4096, kLoopCtas = 2048, kLoopBytes = 24 << 10;
  const gemm::Spec g = spec.projection();
  const int64_t pairs = m * spec.topk;
  c.mt = 1;
  if (pairs >= spec.experts && g.per_chunk() <= 8) {
    while (c.mt * 2 <= std::min<int64_t>(2 * share, 8)) c.mt *= 2;
  }
  c.rows = spec.op == Op::kGateUp && c.mt > 1 ? 4 : 8;
  const int64_t chunks = g.k / g.per_chunk();
  const int64_t out_rows = g.out_cols();
  auto ctas = [&] { return max_tiles(spec, c, pairs) * ((out_rows + c.tile_cols() - 1) / c.tile_cols()); };
  const int64_t per_lane = ctas() < kManyCtas ? 32 : 64;
  c.warps = gemv_warps(chunks, per_lane);
  while (c.warps > 1 && c.invalid_reason(spec)) --c.warps;
  while (c.rows > 1 && c.invalid_reason(spec)) c.rows /= 2;
  while (c.mt > 1 && c.invalid_reason(spec)) c.mt /= 2;
  // A full grid of one-warp CTAs over rows whose chunk count 32 does not divide: groups of
  // lanes, as many as leave each lane whole chunks, on 16 rows (4-bit down of a 768-wide expert
  // at 4 and 16 tokens: 8-lane groups took the best config from 12.4 to 11.3 and from 39.8 to
  // 35.1 µs on the H100; with loops of rows or on small grids, where one token's CTAs each want
  // their loads in flight at once, they lost). At most 4 chunks a lane (3 measured): a lane
  // walks its chunks one after another, a slot's few loads in flight at a time.
  // In the 4-bit formats with registers for 32 such CTAs an SM (occ): the grid of thousands
  // then runs in about one wave instead of 1.4 of the 22 CTAs that 91 registers allow (the
  // Qwen3-30B-A3B down projection at 4 and 8 tokens on the H100: 4-14 % faster in awq4, gptq4,
  // nvfp4 and mxfp4; the 8-bit formats, at 56-62 registers already, within ±5 %;
  // bench/RESULTS.md).
  if (c.warps == 1 && gemv_lane_groups(chunks) > 1 && ctas() >= kManyCtas) {
    Config grouped = c;
    grouped.rows = 16, grouped.groups = gemv_lane_groups(chunks);
    if (g.per_chunk() >= 32) grouped.occ = Config::kMaxOccThreads / grouped.cta_threads();
    while (grouped.groups > 1 && grouped.slots() % grouped.groups != 0) grouped.groups /= 2;
    while (grouped.rows > c.rows && grouped.invalid_reason(spec)) grouped.rows /= 2;
    if (grouped.groups > 1 && !grouped.invalid_reason(spec)) return grouped;
  }
  const int64_t group_bytes = int64_t(c.slots()) * chunks * 16;
  while (c.loop < 8 && group_bytes * c.loop * 2 <= kLoopBytes && ctas() / 2 >= kLoopCtas) {
    c.loop *= 2;
    if (c.invalid_reason(spec)) {
      c.loop /= 2;
      break;
    }
  }
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid gemv config: " + *why);
  return c;
}

// Each gemv or decode candidate of one or two warps again with registers capped at 64 and at
// 128 a thread (`occ`: 32 and 16 one-warp CTAs an SM, 16 and 8 two-warp ones), where the
// thousands of small CTAs of a decode step otherwise run in 1.2–1.7 waves of register-bound
// slots (91–213 registers: 9–22 an SM). Where 64 registers spill, 128 may not.
static void with_occupancy(const Spec& spec, std::vector<Config>& out) {
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    Config c = out[i];
    if (c.mma() || c.tc_small() || c.warps > 2 || c.mt > 2) continue;
    for (int occ : {Config::kMaxOccThreads / c.cta_threads(), Config::kMaxOccThreads / (2 * c.cta_threads())}) {
      c.occ = occ;
      if (!c.invalid_reason(spec)) out.push_back(c);
    }
  }
}

std::vector<Config> candidate_configs(const Spec& spec, Arch arch) {
  std::vector<Config> out;
  Config c;
  c.op = spec.op;
  if (spec.op == Op::kDecode) {
    for (int warps : {1, 2, 4}) {
      for (int rows : {4, 8, 16}) {
        for (int down_rows : {8, 16, 32}) {
          for (int groups : {1, 2, 4, 8, 16}) {
            for (bool interleave : {false, true}) {
              c.warps = warps, c.rows = rows, c.down_rows = down_rows, c.groups = groups, c.interleave = interleave;
              if (!c.invalid_reason(spec)) out.push_back(c);
            }
          }
        }
      }
    }
    with_occupancy(spec, out);
    return out;
  }
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
  // Decode's tiles of one or two pairs: CTAs that walk 2 to 16 groups of rows (the tile search
  // and a CTA's start paid once for more weight bytes).
  for (int mt : {1, 2}) {
    for (int rows : {4, 8, 16}) {
      for (int warps : {1, 2, 4}) {
        for (int loop : {2, 4, 8, 16}) {
          c.mt = mt, c.rows = rows, c.warps = warps, c.loop = loop;
          if (!c.invalid_reason(spec)) out.push_back(c);
        }
      }
    }
  }
  c.loop = 1;
  // One warp in groups of lanes, where a row's chunks leave some of 32 lanes idle.
  const gemm::Spec g = spec.projection();
  if ((g.k / g.per_chunk()) % 32 != 0) {
    for (int mt : {1, 2}) {
      for (int rows : {4, 8, 16}) {
        for (int groups : {2, 4, 8, 16}) {
          for (int loop : {1, 2, 4}) {
            c.mt = mt, c.rows = rows, c.warps = 1, c.groups = groups, c.loop = loop;
            if (!c.invalid_reason(spec)) out.push_back(c);
          }
        }
      }
    }
  }
  c.loop = 1, c.groups = 1;
  with_occupancy(spec, out);
  // sm_80+: the gemm family's tc_small tile over 8 or 16 pairs of an expert, each weight chunk
  // decoded once for all of them.
  if (arch.has_mma_m16n8k16()) {
    c.strategy = Strategy::kTcSmall;
    for (int mt : {8, 16}) {
      for (int rows : {16, 32, 64}) {
        for (int warps : {1, 2, 4}) {
          for (int stages : {1, 3}) {
            c.mt = mt, c.rows = rows, c.warps = warps, c.stages = stages;
            if (!c.invalid_reason(spec)) out.push_back(c);
          }
        }
      }
    }
  }
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
  if (c.op == Op::kDecode) return m <= decode_max_tokens(spec);
  if (!c.projection()) return true;
  // Tiles up to twice the even share (skewed routing fills some experts more), never more
  // pairs than the bucket has. The tensor-core tiles from half as many pairs as experts, where
  // tc_small (sm_80+) is the default from as many (at a quarter, 4 tokens on Qwen3-30B-A3B's
  // layer, it ran 10–40 % slower than the gemv on the H100): on sm_70 the mma tile's 16 pairs
  // are the only tensor-core tile, and whether it beats the gemv's decode per pair from 16
  // tokens is for the tuner on the user's V100 to find; 16-pair tc_small tiles and larger mma
  // ones where twice the share fills them.
  const int64_t share = pairs_per_expert(spec, m);
  if (max_tiles(spec, c, m * spec.topk) > 65535) return false;  // past the grid's y limit (geometry refuses it)
  const bool half_the_experts = 2 * m * spec.topk >= spec.experts;
  if (c.mma()) return half_the_experts && c.bm <= std::max<int64_t>(16, 2 * share);
  if (c.tc_small()) return half_the_experts && c.mt <= std::max<int64_t>(8, 2 * share);
  return c.mt <= std::max<int64_t>(1, std::min<int64_t>(2 * share, m * spec.topk));
}

}  // namespace onecat::moe
