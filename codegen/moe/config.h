// moe config: what the tuner varies, per op.
//   route:            threads=256,tokens=32
//   gate_up, down:    strategy=gemv,mt=4,rows=4,warps=4[,loop=4][,groups=4][,occ=16]
//                     strategy=mma,bm=64,bn=128,wm=2,wn=2
//                     strategy=tc_small,mt=8,rows=16,warps=2,stages=3   (sm_80+)
//   combine:          threads=128
//   decode:           warps=1,rows=8,down_rows=16[,groups=4][,interleave=1][,occ=32]
// route: CTAs of `threads` threads, each routing `tokens` tokens (a warp per token) and ranking
// its pairs per expert; the last CTA to finish groups them all (templates/moe/route.cuh).
// gate_up and down, strategy=gemv: a CTA owns `loop` groups (default 1, printed when more) of
// `rows` output rows of one tile of up to `mt` pairs routed to the same expert (the tiles of
// each expert in pair order), the groups one after the other, and its warps split K, each lane
// streaming 16-byte chunks of the expert's weight rows (the gemm family's gemv,
// templates/gemm/gemv.cuh, with the token rows read by index): decode, a few pairs per expert.
// With one warp, `groups` (default 1, printed when more) splits it into groups of lanes that
// each sum a share of the CTA's rows over every chunk: rows whose chunk count 32 does not
// divide keep all lanes busy. `occ` (gemv and decode; default 1, printed when more) asks the
// compiler for registers enough to keep that many CTAs on an SM (`__launch_bounds__`'s second
// argument, at most 1024 threads: 64 registers a thread): a grid of thousands of one-warp CTAs
// fits one wave of the SMs' 32 CTA slots instead of 1.4 of their register-bound ones.
// gate_up and down, strategy=mma: a CTA computes a tile of up to `bm` pairs of one expert ×
// `bn` weight rows with wm × wn warps on tensor cores (the gemm family's atom=wmma tile,
// templates/gemm/mma.cuh, x rows read by index): prefill, many pairs per expert.
// gate_up and down, strategy=tc_small (sm_80+): a CTA computes `rows` output rows (16, 32 or
// 64) of a tile of up to `mt` pairs (8 or 16) of one expert on mma.m16n8k16 with the weights as
// the A operand (the gemm family's tc_small tile, templates/gemm/tc_small.cuh, `stages` as
// there, no split): each weight chunk decoded once for the tile's pairs, for decode batches
// that give experts a few pairs each.
// combine: a CTA of `threads` threads per token.
// decode (templates/moe/decode.cuh): CTAs of `warps` warps, one pair each: gate_up CTAs own
// `rows` rows of h, down CTAs `down_rows` rows of y, each as strategy=gemv with mt=1 (and
// `groups` lane groups on down, printed when more than 1); interleave=1 (printed when set) puts
// each pair's down CTAs right after its gate_up CTAs in the grid, else every gate_up CTA comes
// first.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/gemm/config.h"
#include "codegen/moe/spec.h"

namespace onecat::moe {

enum class Strategy { kGemv, kMma, kTcSmall };

struct Config {
  // gemv: as the gemm family's (codegen/gemm/config.h): fp32 accumulators and raw chunks per thread.
  static constexpr int kMaxAccumulators = 64;
  static constexpr int kMaxWeightRegs = 64;
  static constexpr int kRegsPerChunk = 4;

  Op op = Op::kRoute;  // the spec's op: which fields below apply (and print)
  int threads = 256;   // route, combine
  int tokens = 1;      // route: tokens per CTA
  static constexpr int kMaxRoutePairs = 4096;  // route: tokens × topk per CTA (two shared int arrays)
  Strategy strategy = Strategy::kGemv;  // gate_up, down
  int mt = 1, rows = 4, warps = 4;      // strategy=gemv and tc_small
  int stages = 1;                       // strategy=tc_small
  int loop = 1;                         // strategy=gemv: groups of `rows` rows per CTA
  int groups = 1;                       // strategy=gemv, one warp: groups of lanes sharing the rows
  int bm = 64, bn = 128, wm = 2, wn = 2;  // strategy=mma
  int down_rows = 16;                     // decode: the down CTAs' rows (`rows`: the gate_up CTAs')
  bool interleave = false;                // decode: each pair's CTAs together in the grid
  int occ = 1;                            // gemv, decode: CTAs an SM the registers must allow
  static constexpr int kMaxOccThreads = 1024;  // occ × CTA threads: at least 64 registers a thread

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  bool projection() const { return op == Op::kGateUp || op == Op::kDown; }
  bool mma() const { return projection() && strategy == Strategy::kMma; }
  bool tc_small() const { return projection() && strategy == Strategy::kTcSmall; }
  // route: CTAs for m tokens.
  int64_t route_ctas(int64_t m) const { return (m + tokens - 1) / tokens; }
  int cta_threads() const {
    return op == Op::kDecode ? warps * 32 : !projection() ? threads : mma() ? wm * wn * 32 : warps * 32;
  }
  int slots() const { return op == Op::kGateUp ? 2 * rows : rows; }
  // Pairs per tile (the grid's tiles split each expert's pairs into runs of this many).
  int tile_pairs() const { return mma() ? bm : mt; }
  // Output columns per CTA.
  int tile_cols() const { return !mma() ? rows * loop : op == Op::kGateUp ? bn / 2 : bn; }
  // strategy=mma and tc_small: the gemm family's config of the same tile (its validity rules apply).
  gemm::Config gemm_mma() const;
  gemm::Config gemm_tc_small() const;
  // decode: its gate_up (which = kGateUp) or down CTAs as that op's strategy=gemv config.
  Config decode_gemv(Op which) const;
  // decode: CTAs per pair of each projection.
  int64_t decode_blocks(const Spec& spec, Op which) const;
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::moe
