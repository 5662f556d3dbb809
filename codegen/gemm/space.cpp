#include "codegen/gemm/space.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <tuple>

#include "base/error.h"

namespace onecat::gemm {
namespace {

// Enough CTAs to fill 80 V100 SMs (or 132 H100/H200 SMs) about twice.
constexpr int64_t kTargetCtas = 256;
// 16-byte chunks each lane reads per row: enough that the CTA-wide reduction is rare.
constexpr int64_t kChunksPerLane = 4;

}  // namespace

// Above this many tokens the tensor-core strategy takes over from gemv.
constexpr int64_t kGemvMaxM = 16;
// From this many tokens up to kGemvMaxM, sm_80+ defaults to tc_small instead of gemv.
constexpr int64_t kTcSmallMinM = 3;
// Up to this many tokens tc_small is a candidate (two 16-token tiles; fits_bucket).
constexpr int64_t kTcSmallMaxM = 32;
// From this many tokens the tuner times only mma tiles of 64 tokens or more (fits_bucket).
constexpr int64_t kTallTilesFromM = 512;
// Beyond this many tokens the tuner times no gemv (fits_bucket).
constexpr int64_t kGemvMaxTunedM = 32;
// From this many tokens a dequantising format runs strategy=cublas untuned (cublas_by_default).
constexpr int64_t kCublasPackedMinM = 129;

// CTAs an mma config launches for m tokens (templates/gemm/mma*.cuh: a gated tile covers bn/2 outputs).
static int64_t mma_ctas(const Spec& spec, const Config& c, int64_t m) {
  const int64_t cols = spec.epilogue == Epilogue::kSiluMul ? c.bn / 2 : c.bn;
  return (spec.out_cols() + cols - 1) / cols * ((m + c.bm - 1) / c.bm);
}

// Whether K splits into s parts of whole K steps of bk, at least 8 of them.
static bool splits_k(const Spec& spec, int bk, int s) {
  return spec.k % (int64_t(bk) * s) == 0 && spec.k / (int64_t(bk) * s) >= 8;
}

// Split-K where the tiles are too few to fill the GPU (under `enough` CTAs: narrow N, few
// tokens): the smallest split of 2, 4 or 8 that reaches `target` CTAs (splits_k), else the
// largest such split.
static int default_split(const Spec& spec, const Config& c, int64_t m, int bk, int64_t enough,
                         int64_t target = kTargetCtas) {
  const int64_t ctas = mma_ctas(spec, c, m);
  if (ctas >= enough) return 1;
  int split = 1;
  for (int s : {2, 4, 8}) {
    if (!splits_k(spec, bk, s)) break;
    split = s;
    if (ctas * split >= target) break;
  }
  return split;
}

// The 64- and 128-token tiles' split: the largest (splits_k) that keeps the tiles within
// kTargetCtas CTAs where that still makes 3/4 of them, else default_split's. A second, partial
// wave cost more than the fewer CTAs (N = 6144: 192 CTAs 28.7 µs at 33 tokens and 30.5 at 64,
// 384 CTAs 33.4 and 35.9; at 96 and 128 tokens 7–12 % faster on awq4 and fp8b128, 10 % slower
// on nvfp4; N = 3072 at 128 tokens 23.9 against 31.1; gate_up with silu·mul at 64 tokens: 192
// or 224 CTAs 8–10 % faster than 384 or 448), while fewer lost (5120×17408: 160 CTAs 81.0 µs
// at 64 tokens, 320 CTAs 73.9; H100).
static int wave_split(const Spec& spec, const Config& c, int64_t m, int bk) {
  const int64_t ctas = mma_ctas(spec, c, m);
  int within = 1;
  for (int s : {2, 4, 8}) {
    if (!splits_k(spec, bk, s) || ctas * s > kTargetCtas) break;
    within = s;
  }
  return ctas * within >= kTargetCtas * 3 / 4 ? within : default_split(spec, c, m, bk, kTargetCtas);
}

static Config mma16816_default(const Spec& spec, int64_t m) {
  Config c;
  c.strategy = Strategy::kMma;
  c.atom = Atom::kM16n8k16;
  // Many tokens, pipe=2: 4 warps of 64×32 or 64×64 on a 128×64 or 128×128 tile, stages=4:
  // 128×128 with K steps of 32 where that still gives two CTAs per target (N ≥ ~16K), else
  // 128×64 with K steps of 64 so that narrow N still fills the SMs (the fastest tiles of every
  // qwen3-8b linear layer at M=512: docs/gemm.md). Below kTargetCtas CTAs even at 128×64, the
  // split tiles below.
  if (m >= 512) {
    c.bm = 128, c.wm = 2, c.wn = 2, c.stages = 4, c.pipe = 2;
    c.bn = 128, c.bk = 32;
    if (mma_ctas(spec, c, m) < 2 * kTargetCtas) c.bn = 64, c.bk = 64;
    if (c.invalid_reason(spec)) c.bk = 32;
    if (mma_ctas(spec, c, m) >= kTargetCtas && !c.invalid_reason(spec)) return c;
    c.pipe = 1;
  }
  // 17–511 tokens: pipe=2 with K steps of 64 through four stages, 32×128 tiles (four 32×32
  // warps) to 32 tokens, 64×128 (four 32×64 warps) to 64, else 128×64 (four 64×32 warps),
  // split along K to kTargetCtas CTAs where the tiles launch fewer. In the H200 tunes of
  // 2026-12-04 (qwen3-8b's awq4, fp8b128 and nvfp4 layers at 32 and 128 tokens) these were the
  // fastest own tiles or within 1.3× of them, where pipe=1 on enough tiles (the gate_up layer)
  // was 1.6–2.0× the best. At 48–64 tokens the 128-token tile computes twice the rows it
  // needs: the 64-token tile was 1.15–1.5× faster on eight of eleven 4- and 8-bit shapes at 49
  // and 64 tokens (H100, 2026-12-07), the other three within 4 %. At 33–47 tokens two 32-token
  // tiles decode every weight twice: one 64-token tile was 1.2–1.8× faster on N = 4096 (awq4,
  // mxfp4; fp8b128 1.04×), 5–10 % slower on nvfp4 6144×4096 (H100, 2026-12-07).
  {
    Config s;
    s.strategy = Strategy::kMma;
    s.atom = Atom::kM16n8k16;
    s.pipe = 2, s.bk = 64, s.stages = 4;
    if (m <= 32) {
      s.bm = 32, s.bn = 128, s.wm = 1, s.wn = 4;
    } else if (m <= 64) {
      s.bm = 64, s.bn = 128, s.wm = 2, s.wn = 2;
    } else {
      s.bm = 128, s.bn = 64, s.wm = 2, s.wn = 2;
    }
    s.split = s.bm >= 64 ? wave_split(spec, s, m, s.bk) : default_split(spec, s, m, s.bk, kTargetCtas);
    // 33–64 tokens of packed weights with K up to 8192: 64×64 tiles (four 32×32 warps, ~150
    // registers against 240, so three CTAs an SM instead of two), split along K to at least
    // 1.5 × kTargetCtas CTAs (about one wave of three). On the H100 at 64 tokens this was 1.03–1.31×
    // faster than the 64×128 tile on ten of eleven 4- and 8-bit shapes with K of 4096 or 5120
    // (N = 4096, 6144, 17408, 34816, gate_up 24576 with silu·mul; 49 tokens on N = 6144 alike),
    // 6 % slower on nvfp4's gate_up; with K = 12288 it lost 6–29 %. At 33 and 40 tokens it was
    // 1.12–1.27× faster on N = 6144 and 17408 (awq4, nvfp4), 1.08× on nvfp4 4096×4096 and
    // within 2 % elsewhere; at 96 and 128 tokens it lost to the 128×64 tile (bench/RESULTS.md, gemm).
    if (m >= 33 && m <= 64 && spec.format != quant::WeightFormat::kF16 && spec.k <= 8192) {
      Config t = s;
      t.bn = 64;
      t.split = default_split(spec, t, m, t.bk, kTargetCtas * 3 / 2, kTargetCtas * 3 / 2);
      if (!t.invalid_reason(spec)) return t;
    }
    if (!s.invalid_reason(spec)) return s;
    s.split = 1;
    if (!s.invalid_reason(spec)) return s;
  }
  // Where those tiles cannot run (K not a multiple of 64): pipe=1, warp tiles of 64×64
  // (bm=128, 4 warps), 32×64 (bm=64) or 32×32 (bm=32), K steps of 32 through four stages.
  c.bm = m >= 128 ? 128 : m >= 64 ? 64 : 32;
  c.bn = 128;
  c.wm = c.bm == 32 ? 1 : 2;
  c.wn = c.bm == 32 ? 4 : 2;
  c.bk = 32;
  c.stages = 4;
  while (c.bn > 64 && (spec.out_cols() + c.bn - 1) / c.bn * ((m + c.bm - 1) / c.bm) < kTargetCtas / 2) c.bn /= 2;
  while (c.wn > 1 && c.invalid_reason(spec)) c.wn /= 2;
  while (c.stages > 2 && c.invalid_reason(spec)) --c.stages;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid mma config: " + *why);
  return c;
}

// 8-bit weights (fp8b128, fp8b32) at 17–32 tokens on sm_80+: tc_small's 32-row tile over two
// 16-token tiles, with warps enough for about 2048 on the GPU (16 per SM of an H200) and the
// cp.async ring only where a CTA has two warps. In the H200 tunes of 2026-12-04 it was the
// fastest fp8b128 config of each qwen3-8b layer at 32 tokens, where the mma tiles were 1.1–1.4×
// slower; for the 4-bit formats mma split-K stayed within 1.15× of the best and tc_small did not.
static std::optional<Config> tc_small_8bit_default(const Spec& spec, int64_t m) {
  Config c;
  c.strategy = Strategy::kTcSmall;
  c.mt = 16, c.rows = 32;
  const int64_t ctas = (spec.out_cols() + c.rows - 1) / c.rows * ((m + c.mt - 1) / c.mt);
  c.warps = int(std::clamp<int64_t>(std::bit_floor(uint64_t(std::max<int64_t>(2048 / ctas, 1))), 2, 16));
  c.stages = c.warps <= 2 ? 3 : 1;
  while (c.warps > 2 && c.invalid_reason(spec)) c.warps /= 2;
  if (c.invalid_reason(spec)) return std::nullopt;
  return c;
}

// tc_small (sm_80+) for a bucket of 2..16 tokens: each weight chunk is decoded once for all
// tokens (gemv decodes it once per token). The widest row tile that gives every SM about two
// CTAs (a CTA reads its tokens' x from L2 once per `rows` weight rows: with 16 rows and 16
// tokens that is 4× the int4 weight bytes); where even 16-row tiles would make more than that
// (N = 6144: 384) and the wide ones fewer, the wide tile split along K instead; warps enough
// that each takes a few k-blocks.
static Config tc_small_default(const Spec& spec, int64_t m) {
  Config c;
  c.strategy = Strategy::kTcSmall;
  c.mt = m <= 8 ? 8 : 16;
  // 64-row tiles for int4 only: they halve the x read from L2 per weight byte, which bounds
  // int4 at 16 tokens; fp8b128 and mxfp4 ran slower on them (docs/gemm.md).
  const bool int4 = quant::is_int4(spec.format);
  c.rows = int4 ? 64 : 32;
  const int64_t blocks = (spec.k / spec.per_chunk() + 3) / 4;
  const int64_t token_tiles = (m + c.mt - 1) / c.mt;
  auto ctas = [&] { return (spec.out_cols() + c.rows - 1) / c.rows * token_tiles * c.split; };
  // Split or narrow: the split wide tile wins where 16-row tiles make more than one wave
  // (N = 6144: 384 CTAs, 1.5 waves at two per SM) and loses where they make exactly one
  // (N = 4096: 256 CTAs, 16 warps per SM against the split tiles' 8). With 8-token tiles
  // (fewer registers, three 16-row CTAs per SM) only int4's 64-row tile gains from it
  // (figures: docs/gemm.md). f16 (not measured) reads as many weight bytes as x bytes on
  // 16-row tiles: no split.
  if ((spec.out_cols() + 15) / 16 * token_tiles > kTargetCtas && (c.mt == 16 || int4) &&
      spec.format != quant::WeightFormat::kF16) {
    // Split parts of at least 4 k-blocks (two for each of two warps).
    while (ctas() < kTargetCtas && blocks % (2 * c.split) == 0 && blocks / (2 * c.split) >= 4) c.split *= 2;
  }
  while (c.rows > 16 && ctas() < kTargetCtas) c.rows /= 2;
  c.warps = 8;
  while (c.warps > 1 && blocks / c.split / c.warps < 2) c.warps /= 2;
  // Row tiles of 32 or more leave CTAs enough: four warps (faster than eight there for awq4,
  // mxfp4 and fp8b128: docs/gemm.md).
  if (c.rows >= 32) c.warps = std::min(c.warps, 4);
  // Weights through a three-slot cp.async ring: two k-blocks in flight without registers.
  c.stages = 3;
  while (c.rows > 16 && c.invalid_reason(spec)) c.rows /= 2;
  while (c.warps > 2 && c.invalid_reason(spec)) c.warps /= 2;
  while (c.stages > 1 && c.invalid_reason(spec)) --c.stages;
  while (c.warps > 1 && c.invalid_reason(spec)) c.warps /= 2;
  while (c.split > 1 && c.invalid_reason(spec)) c.split /= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid tc_small config: " + *why);
  return c;
}

static Config mma_default(const Spec& spec, int64_t m) {
  Config c;
  c.strategy = Strategy::kMma;
  // Warp tiles of 64×32 (bm=128, 8 warps), 32×64 (bm=64) or 32×32 (bm=32): at most 64
  // accumulators per thread, which leaves sm_70 room for operands and prefetch.
  c.bm = m >= 128 ? 128 : m >= 64 ? 64 : 32;
  c.bn = 128;
  c.wm = c.bm == 128 ? 2 : c.bm == 64 ? 2 : 1;
  c.wn = c.bm == 64 ? 2 : 4;
  // Narrow outputs: smaller n tiles so every SM gets work.
  // (bn=32 is several times slower per flop than bn=128, docs/gemm.md: keep ≥ 64.)
  while (c.bn > 64 && (spec.out_cols() + c.bn - 1) / c.bn * ((m + c.bm - 1) / c.bm) < kTargetCtas / 2) c.bn /= 2;
  while (c.wn > 1 && c.invalid_reason(spec)) c.wn /= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid mma config: " + *why);
  if (const int split = default_split(spec, c, m, Config::kMmaBk, kTargetCtas / 2); split > 1) {
    Config s = c;
    s.split = split;
    if (!s.invalid_reason(spec)) return s;
  }
  return c;
}

Config default_config(const Spec& spec, int64_t m, Arch arch) {
  // norm=rms runs in the gemv only (the forward fuses norms at decode's few tokens).
  if (!spec.norm && m > kGemvMaxM && spec.k % Config::kMmaBk == 0) {
    if (!arch.has_mma_m16n8k16()) return mma_default(spec, m);
    const bool fp8 = spec.format == quant::WeightFormat::kFp8B128 || spec.format == quant::WeightFormat::kFp8B32;
    if (fp8 && m <= kTcSmallMaxM) {
      if (auto c = tc_small_8bit_default(spec, m)) return *c;
    }
    return mma16816_default(spec, m);
  }
  if (!spec.norm && arch.has_mma_m16n8k16() && m >= kTcSmallMinM) return tc_small_default(spec, m);
  Config c;
  c.mt = 1;
  while (c.mt < std::min<int64_t>(m, 16)) c.mt *= 2;
  // One token: four rows per CTA (eight for the E2M1 formats), and warps enough for about two
  // chunks per lane, at most four (eight for 4-bit formats), as many as split the chunks
  // evenly (K = 14336 in 4-bit: 448 chunks, 7 warps; without an even split a power of two):
  // near the best config of the 8B shapes' sweeps (docs/gemm.md). Several tokens:
  // eight rows share each load of x (fewer with many tokens: accumulators). Half the rows
  // with silu_mul, and fewer where they would leave too few CTAs.
  const bool e2m1 = spec.format == quant::WeightFormat::kNvfp4 || spec.format == quant::WeightFormat::kMxfp4;
  c.rows = c.mt == 1 ? (e2m1 ? 8 : 4)
                     : std::max(1, std::min(Config::kMaxWeightRegs / Config::kRegsPerChunk, Config::kMaxAccumulators / c.mt) / 2);
  if (spec.epilogue == Epilogue::kSiluMul) c.rows = std::max(1, c.rows / 2);
  while (c.rows > 1 && (spec.out_cols() + c.rows - 1) / c.rows < kTargetCtas) c.rows /= 2;
  const int64_t chunks = spec.k / spec.per_chunk();
  if (c.mt == 1) {
    const int most = int(std::clamp<int64_t>(chunks / 64, 1, spec.per_chunk() == 32 ? 8 : 4));
    c.warps = most;
    while (c.warps > 1 && chunks % (int64_t(c.warps) * 32) != 0) --c.warps;
    if (c.warps == 1) c.warps = int(std::bit_floor(unsigned(most)));  // no even split: a partial last iteration
  } else {
    // Enough chunks per lane that the reduction across the CTA is paid rarely.
    c.warps = 1;
    while (c.warps < 8 && chunks / (int64_t(c.warps) * 2 * 32) >= kChunksPerLane) c.warps *= 2;
  }
  if ((spec.out_cols() + c.rows - 1) / c.rows < kTargetCtas) c.warps = std::min(c.warps * 2, 16);
  while (c.warps > 1 && c.invalid_reason(spec)) c.warps /= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid gemv config: " + *why);
  return c;
}

int64_t gemv_default_max_m(Arch arch) { return arch.has_mma_m16n8k16() ? kTcSmallMinM - 1 : kGemvMaxM; }

// gemv, tc_small and mma: onecat's own kernels.
static std::vector<Config> kernel_candidates(const Spec& spec, Arch arch) {
  std::vector<Config> out;
  // gemv: powers of two of warps, and the other counts that split K's chunks evenly over the
  // lanes (K = 14336 in 4-bit formats: 448 chunks, two per lane with 7 warps).
  const int64_t chunks = spec.k / spec.per_chunk();
  for (int mt : {1, 2, 4, 8, 16}) {
    for (int rows : {1, 2, 4, 8}) {
      for (int warps = 1; warps <= 16; ++warps) {
        if (!std::has_single_bit(unsigned(warps)) && chunks % (int64_t(warps) * 32) != 0) continue;
        Config c;
        c.mt = mt, c.rows = rows, c.warps = warps;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
  }
  if (arch.has_mma_m16n8k16()) {
    // tc_small: both token tiles, every row tile, 2 to 16 warps splitting K, weights through
    // registers (stages=1) or a three-slot cp.async ring; and the wide tiles with the ring
    // split along K over 2, 4 or 8 CTAs.
    for (int mt : {8, 16}) {
      for (int rows : {16, 32, 64}) {
        for (int warps : {2, 4, 8, 16}) {
          for (int stages : {1, 3}) {
            for (int split : {1, 2, 4, 8}) {
              if (split > 1 && (rows == 16 || stages == 1 || warps > 8)) continue;
              Config c;
              c.strategy = Strategy::kTcSmall;
              c.mt = mt, c.rows = rows, c.warps = warps, c.stages = stages, c.split = split;
              if (!c.invalid_reason(spec)) out.push_back(c);
            }
          }
        }
      }
    }
    // Four or eight warps with warp tiles from 16×32 (bm=16, for the tokens of a small
    // bucket) to 64×64, K steps of 32 or 64, three or four stages (pipe=1); the same shapes
    // with three to five stages on pipe=2.
    for (int pipe : {1, 2}) {
      for (int bm : {16, 32, 64, 128, 256}) {
        for (int bn : {64, 128, 256}) {
          for (auto [wm, wn] : {std::pair{1, 4}, std::pair{2, 2}, std::pair{2, 4}, std::pair{4, 2}}) {
            for (int bk : {32, 64}) {
              for (int stages : {3, 4, 5}) {
                Config c;
                c.strategy = Strategy::kMma;
                c.atom = Atom::kM16n8k16;
                c.bm = bm, c.bn = bn, c.wm = wm, c.wn = wn, c.bk = bk, c.stages = stages, c.pipe = pipe;
                // One 16-token warp row for small M (bm=16), else warp tiles of 32 to 64 tokens.
                if (bm == 16 ? wm != 1 : bm / wm < 32) continue;
                if (bn / wn < 32 || bm / wm > 64 || bn / wn > 64) continue;
                if (!c.invalid_reason(spec)) out.push_back(c);
              }
            }
          }
        }
      }
    }
    // Split-K (pipe=2, 4 stages) on the tiles of the small and middle buckets; 64×64 is also
    // the 33–64-token default's tile (mma16816_default).
    for (auto [bm, bn, wm, wn, bk] :
         {std::tuple{32, 128, 1, 4, 64}, std::tuple{64, 128, 2, 2, 64}, std::tuple{64, 64, 2, 2, 64},
          std::tuple{128, 64, 2, 2, 64}, std::tuple{128, 128, 2, 2, 32}}) {
      for (int split : {2, 4, 8}) {
        Config c;
        c.strategy = Strategy::kMma;
        c.atom = Atom::kM16n8k16;
        c.bm = bm, c.bn = bn, c.wm = wm, c.wn = wn, c.bk = bk, c.stages = 4, c.pipe = 2, c.split = split;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
    return out;
  }
  for (int bm : {16, 32, 64, 128}) {
    for (int bn : {32, 64, 128, 256}) {
      for (auto [wm, wn] : {std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 1}, std::pair{2, 2}, std::pair{2, 4}, std::pair{4, 2}}) {
        Config c;
        c.strategy = Strategy::kMma;
        c.bm = bm, c.bn = bn, c.wm = wm, c.wn = wn;
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
  }
  // Split-K on the tiles of the small and middle buckets.
  for (auto [bm, bn, wm, wn] : {std::tuple{32, 128, 1, 4}, std::tuple{64, 128, 2, 2}, std::tuple{64, 64, 2, 2}}) {
    for (int split : {2, 4, 8}) {
      Config c;
      c.strategy = Strategy::kMma;
      c.bm = bm, c.bn = bn, c.wm = wm, c.wn = wn, c.split = split;
      if (!c.invalid_reason(spec)) out.push_back(c);
    }
  }
  return out;
}

std::vector<Config> candidate_configs(const Spec& spec, Arch arch) {
  std::vector<Config> out = kernel_candidates(spec, arch);
  // Then cuBLAS on fp16 weights (dequantised first where packed), on every arch: last, so
  // that one of onecat's kernels wins a tie within the tuner's noise band.
  Config library;
  library.strategy = Strategy::kCublas;
  if (!library.invalid_reason(spec)) out.push_back(library);
  return out;
}

bool fits_bucket(const Spec&, const Config& c, int64_t m) {
  if (c.strategy == Strategy::kGemv) {
    // Up to two 16-token tiles: each further tile reads the weights again (at 512 tokens the
    // fastest gemv was 11.9× the best or slower in all 60 records of the qwen3-8b tunes).
    if (m > kGemvMaxTunedM) return false;
    int tile = 1;
    while (tile < std::min<int64_t>(m, 16)) tile *= 2;
    return c.mt == tile;
  }
  // tc_small up to two 16-token tiles (M=32: the second CTA row reads the weights from L2).
  if (c.strategy == Strategy::kTcSmall) return m <= kTcSmallMaxM && c.mt == (m <= 8 ? 8 : 16);
  // cuBLAS beyond the sizes gemv and tc_small are made for (a dequantising format writes and
  // rereads its whole weight per launch, which few tokens cannot repay).
  if (c.strategy == Strategy::kCublas) return m > kGemvMaxM;
  // Tensor-core tiles only beyond a few tokens, and no taller than twice the bucket. From 512
  // tokens at least 64 tokens tall: in the qwen3-8b tunes of 2026-11-29/30 (60 records at 512
  // tokens, bench/data/tune-qwen3-8b-*.jsonl.gz) the fastest tile of 16 or 32 tokens was 1.22× the
  // best or slower every time, so timing them only lengthened the tune.
  return m > 8 && c.bm <= 2 * std::max<int64_t>(m, 16) && (m < kTallTilesFromM || c.bm >= 64);
}

// On the H200 (bench/RESULTS.md, gemm strategy=cublas) cuBLAS on f16 weights beat the default
// on every qwen3-8b layer from 32 tokens (1.2–1.7×; 1.6–2.1× at 2048); a dequantising format pays
// a whole-matrix dequantisation per launch, which lost at 32 tokens (awq4: 2–3× slower) and
// won from 512 (awq4 1.42× at 512, 1.6–2.0× at 2048). Since the dequantisation runs at copy
// bandwidth it also wins from 129 tokens, where the own default takes two or more 128-token
// tiles: on eight 4- and 8-bit shapes (H100, 2026-12-07) 1.0–1.5× at 129 and 160 tokens
// (gate_up with silu_mul: 1.0–1.05×), 1.0–1.45× at 192, 1.3–2.1× at 384. At 128 one tile holds
// every row and onecat's own kernel wins.
bool cublas_by_default(const Spec& spec, int64_t m) {
  if (spec.act_order) return false;
  return spec.format == quant::WeightFormat::kF16 ? m > kGemvMaxM : m >= kCublasPackedMinM;
}

}  // namespace onecat::gemm
