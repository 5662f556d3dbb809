#include "codegen/moe/config.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::moe {

Config Config::parse(const Spec& spec, std::string_view text) {
  const std::string what = "config " + quoted_input(text) + " of " + spec.to_string();
  FieldReader r(text, what);
  Config c;
  c.op = spec.op;
  if (c.projection()) {
    const std::string strategy = r.choice("strategy", {"gemv", "mma", "tc_small"});
    c.strategy = strategy == "mma" ? Strategy::kMma : strategy == "tc_small" ? Strategy::kTcSmall : Strategy::kGemv;
    if (c.tc_small()) {
      c.mt = static_cast<int>(r.integer("mt", 1, 64));
      c.rows = static_cast<int>(r.integer("rows", 1, 64));
      c.warps = static_cast<int>(r.integer("warps", 1, 16));
      c.stages = static_cast<int>(r.integer("stages", 1, 4));
    } else if (c.mma()) {
      c.bm = static_cast<int>(r.integer("bm", 16, 128));
      c.bn = static_cast<int>(r.integer("bn", 16, 256));
      c.wm = static_cast<int>(r.integer("wm", 1, 8));
      c.wn = static_cast<int>(r.integer("wn", 1, 8));
    } else {
      c.mt = static_cast<int>(r.integer("mt", 1, 64));
      c.rows = static_cast<int>(r.integer("rows", 1, 64));
      c.warps = static_cast<int>(r.integer("warps", 1, 16));
      c.loop = static_cast<int>(r.integer_or("loop", 1, 1, 64));
      c.groups = static_cast<int>(r.integer_or("groups", 1, 1, 32));
      c.occ = static_cast<int>(r.integer_or("occ", 1, 1, 32));
    }
  } else if (c.op == Op::kDecode) {
    c.warps = static_cast<int>(r.integer("warps", 1, 16));
    c.rows = static_cast<int>(r.integer("rows", 1, 64));
    c.down_rows = static_cast<int>(r.integer("down_rows", 1, 64));
    c.groups = static_cast<int>(r.integer_or("groups", 1, 1, 32));
    c.interleave = r.integer_or("interleave", 0, 0, 1) == 1;
    c.occ = static_cast<int>(r.integer_or("occ", 1, 1, 32));
  } else {
    c.threads = static_cast<int>(r.integer("threads", 32, 1024));
    if (c.op == Op::kRoute) c.tokens = static_cast<int>(r.integer("tokens", 1, 256));
  }
  r.finish();
  if (auto why = c.invalid_reason(spec)) throw InputError(what + ": " + *why);
  return c;
}

gemm::Config Config::gemm_mma() const {
  gemm::Config g;
  g.strategy = gemm::Strategy::kMma;
  g.atom = gemm::Atom::kWmma;
  g.bm = bm, g.bn = bn, g.wm = wm, g.wn = wn;
  return g;
}

gemm::Config Config::gemm_tc_small() const {
  gemm::Config g;
  g.strategy = gemm::Strategy::kTcSmall;
  g.mt = mt, g.rows = rows, g.warps = warps, g.stages = stages, g.split = 1;
  return g;
}

Config Config::decode_gemv(Op which) const {
  Config c;
  c.op = which;
  c.strategy = Strategy::kGemv;
  c.mt = 1, c.warps = warps, c.loop = 1;
  c.rows = which == Op::kGateUp ? rows : down_rows;
  c.groups = which == Op::kGateUp ? 1 : groups;
  c.occ = occ;
  return c;
}

int64_t Config::decode_blocks(const Spec& spec, Op which) const {
  const int64_t out_rows = spec.projection(which).out_cols();
  const int64_t r = which == Op::kGateUp ? rows : down_rows;
  return (out_rows + r - 1) / r;
}

std::string Config::to_string() const {
  if (op == Op::kDecode) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"warps", std::to_string(warps)}, {"rows", std::to_string(rows)}, {"down_rows", std::to_string(down_rows)}};
    if (groups > 1) f.emplace_back("groups", std::to_string(groups));
    if (interleave) f.emplace_back("interleave", "1");
    if (occ > 1) f.emplace_back("occ", std::to_string(occ));
    return join_fields(f);
  }
  if (tc_small()) {
    return join_fields({{"strategy", "tc_small"},
                        {"mt", std::to_string(mt)},
                        {"rows", std::to_string(rows)},
                        {"warps", std::to_string(warps)},
                        {"stages", std::to_string(stages)}});
  }
  if (mma()) {
    return join_fields({{"strategy", "mma"}, {"bm", std::to_string(bm)}, {"bn", std::to_string(bn)},
                        {"wm", std::to_string(wm)}, {"wn", std::to_string(wn)}});
  }
  if (projection()) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"strategy", "gemv"}, {"mt", std::to_string(mt)}, {"rows", std::to_string(rows)}, {"warps", std::to_string(warps)}};
    if (loop > 1) f.emplace_back("loop", std::to_string(loop));
    if (groups > 1) f.emplace_back("groups", std::to_string(groups));
    if (occ > 1) f.emplace_back("occ", std::to_string(occ));
    return join_fields(f);
  }
  if (op == Op::kRoute) return join_fields({{"threads", std::to_string(threads)}, {"tokens", std::to_string(tokens)}});
  return join_fields({{"threads", std::to_string(threads)}});
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (op != spec.op) return "a config of op " + std::string(op_name(op)) + " for op " + std::string(op_name(spec.op));
  if (occ > 1 && int64_t(occ) * cta_threads() > kMaxOccThreads) {
    return "occ=" + std::to_string(occ) + " CTAs of " + std::to_string(cta_threads()) + " threads exceed " +
           std::to_string(kMaxOccThreads) + " threads an SM (fewer than 64 registers a thread)";
  }
  if (op == Op::kDecode) {
    // Each kind of CTA by the rules of its op's gemv (one pair a tile).
    for (const Op which : {Op::kGateUp, Op::kDown}) {
      Spec one = spec;
      one.op = which;
      if (auto why = decode_gemv(which).invalid_reason(one)) return std::string(op_name(which)) + " CTAs: " + *why;
    }
    return std::nullopt;
  }
  if (!projection()) {
    if (threads % 32 != 0) return "threads=" + std::to_string(threads) + " is not a whole number of warps";
    if (op == Op::kRoute) {
      if ((tokens & (tokens - 1)) != 0) return "tokens=" + std::to_string(tokens) + " is not a power of two";
      if (tokens * spec.topk > kMaxRoutePairs) {
        return "tokens × topk = " + std::to_string(tokens * spec.topk) + " pairs per CTA (max " +
               std::to_string(kMaxRoutePairs) + ")";
      }
      // A lane holds its share of a token's keys and logits and the k picks with their weights;
      // with the rest of the kernel's state that must fit half of what a CTA of `threads`
      // threads leaves each (65536 registers per SM, 255 at most).
      // The sigmoid router holds scores and choice values per expert, and each group's rating.
      const int per_lane = (spec.experts + 31) / 32;
      const int values = (spec.sigmoid ? 2 * per_lane + spec.groups : 2 * per_lane) + 2 * spec.topk;
      const int registers = std::min(255, 65536 / threads);
      if (values > registers / 2) {
        return std::to_string(values) + " registers of routing state per lane, more than half of the " +
               std::to_string(registers) + " a " + std::to_string(threads) + "-thread CTA leaves; use fewer threads";
      }
    }
    return std::nullopt;
  }
  const gemm::Spec g = spec.projection();
  if (mma()) return gemm_mma().invalid_reason(g);
  if (tc_small()) {
    const gemm::Config tile = gemm_tc_small();
    if (auto why = tile.invalid_reason(g)) return why;
    // The tile search's and the pair list's shared memory come on top of the gemm tile's.
    constexpr int kTileSearchBytes = 256;
    const int shared = tile.tc_small_shared_bytes(g) + kTileSearchBytes;
    if (shared > gemm::Config::kMaxSharedBytes) {
      return "the weight ring or the cross-warp reduction and the tile search need " + std::to_string(shared) +
             " bytes of shared memory (max 48 KiB)";
    }
    return std::nullopt;
  }
  if (mt * slots() > kMaxAccumulators) {
    return std::to_string(mt * slots()) + " fp32 accumulators per thread (mt × weight rows; max " +
           std::to_string(kMaxAccumulators) + ")";
  }
  if (slots() * kRegsPerChunk > kMaxWeightRegs) {
    return std::to_string(slots()) + " weight rows per CTA hold " + std::to_string(slots() * kRegsPerChunk) +
           " registers of raw chunks (max " + std::to_string(kMaxWeightRegs) + ")";
  }
  const int64_t chunks = g.k / g.per_chunk();
  if (int64_t(warps) * 32 > chunks && warps > 1) {
    return std::to_string(warps) + " warps split " + std::to_string(chunks) + " 16-byte chunks of a row: some would idle";
  }
  if (groups > 1) {
    if (warps != 1)
      return "groups=" + std::to_string(groups) + " splits one warp (warps=" + std::to_string(warps) + ")";
    if ((groups & (groups - 1)) != 0) return "groups=" + std::to_string(groups) + " is not a power of two";
    if (slots() % groups != 0) {
      return "groups=" + std::to_string(groups) + " does not divide the CTA's " + std::to_string(slots()) +
             " weight rows";
    }
    if (chunks % (32 / groups) != 0) {
      return "groups of " + std::to_string(32 / groups) + " lanes do not split a row's " + std::to_string(chunks) +
             " 16-byte chunks evenly";
    }
  }
  const int64_t out_rows = g.out_cols();
  if (rows > out_rows) return "rows=" + std::to_string(rows) + " exceeds the " + std::to_string(out_rows) + " output rows";
  if (int64_t(rows) * loop > out_rows && loop > 1) {
    return "loop=" + std::to_string(loop) + " groups of " + std::to_string(rows) + " rows exceed the " +
           std::to_string(out_rows) + " output rows";
  }
  return std::nullopt;
}

}  // namespace onecat::moe
