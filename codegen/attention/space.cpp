#include "codegen/attention/space.h"

#include <algorithm>

#include "runtime/cuda/error.h"

namespace onecat::attention {
namespace {

// Split-KV aims at this many CTAs when batch × kv_heads alone is fewer: each CTA streams its
// keys one short tile at a time, so many CTAs must be in flight (H200 sweep at batch 8 / 8K:
// split 16 took 263 µs, split 4 317 µs, split 1 1106 µs; bench/RESULTS.md).
constexpr int64_t kTargetCtas = 1024;
// fp8 caches on the m16n8k16 kernel aim at half as many: at 512 its default took 19.1 / 59.2 /
// 33.0 µs (batch 8 / 1K, 8 / 8K, 32 / 1K; 8 KV heads) against 28.2 / 67.3 / 42.1 at 1024 and
// within 2 % elsewhere, while fp16 lost up to 21 % at 512 (H200, 2026-11-30, bench/RESULTS.md).
constexpr int64_t kTargetCtasFp8M16n8k16 = 512;
constexpr int kMaxDefaultSplit = 16;

int round16(int v) { return (v + 15) / 16 * 16; }

int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// The rows a decode/verify CTA starts from: every query row of a sequence, at most 64.
int decode_bm(const Spec& s) {
  int bm = 16;
  while (bm < std::min(64, round16(s.q * s.group()))) bm *= 2;
  return bm;
}

struct Shape {
  int bm, bn, wn, stages;
};

// atom=m16n8k16 (sm_80+), not yet measured on the GPU: FlashAttention-2's shapes for prefill
// (128 rows of 8 warps × 64 keys at D ≤ 128; 64 × 32 at D = 256, Q staying in shared
// memory), two stages (96 KiB; ~228 registers per thread at D=128 allow one 8-warp CTA per
// SM). Decode/verify: the sequence's rows,
// warp columns that take side-by-side 16-key tiles, the most stages that fit (bytes in flight
// per SM are what a memory-bound kernel needs).
Config m16n8k16_default(const Spec& s, int64_t m) {
  Config c;
  c.op = s.op;
  c.atom = Atom::kM16n8k16;
  std::vector<Shape> shapes;
  if (s.op == Op::kPrefill) {
    const int bm = std::max<int64_t>(m, 1) * s.group() > 64 && s.dim <= 128 ? 128 : 64;
    shapes = {{bm, 64, 1, 3}, {bm, 64, 1, 2}, {64, 64, 1, 2}, {64, 32, 1, 2}, {64, 16, 1, 2}};
  } else {
    const int64_t ctas = std::max<int64_t>(1, m) * s.kv_heads;
    const int64_t target = s.kv == KvType::kF16 ? kTargetCtas : kTargetCtasFp8M16n8k16;
    c.split = std::clamp(pow2_ceil((target + ctas - 1) / ctas), 1, kMaxDefaultSplit);
    const int bm = decode_bm(s);
    // (4, 3) after (2, 4): at fp8 D=128 it spills 4 bytes with NVRTC 12.8 for sm_90.
    shapes = {{bm, 16, 2, 4}, {bm, 16, 4, 3}, {bm, 16, 4, 2}, {bm, 16, 2, 3}, {bm, 16, 2, 2}, {bm, 16, 1, 4}, {bm, 16, 1, 2}};
    // fp8 decode: 32-key tiles, two warp columns, three stages first. With the three-instruction
    // E4M3 decode it beat (16, 2, 4) at 8 of 9 H200 points (batch 1/8/32 × 1K/8K/32K, 32/8 heads,
    // D=128: up to 14 % at batch 32, 7 % at batch 1 / 32K; 3 % slower at batch 8 / 1K;
    // bench/RESULTS.md, 2026-12-01).
    if (s.op == Op::kDecode && s.kv != KvType::kF16) shapes.insert(shapes.begin(), Shape{bm, 32, 2, 3});
  }
  for (const Shape& sh : shapes) {
    c.bm = sh.bm, c.bn = sh.bn, c.wn = sh.wn, c.stages = sh.stages;
    if (!c.invalid_reason(s)) return c;
  }
  throw InputError(s.to_string() + " has no valid m16n8k16 config");
}

std::vector<Config> m16n8k16_candidates(const Spec& s) {
  std::vector<Config> out;
  const bool prefill = s.op == Op::kPrefill;
  const std::vector<int> bms = prefill ? std::vector<int>{64, 128} : std::vector<int>{decode_bm(s), std::min(64, 2 * decode_bm(s))};
  const std::vector<int> bns = prefill ? std::vector<int>{32, 64} : std::vector<int>{16, 32};
  const std::vector<int> wns = prefill ? std::vector<int>{1} : std::vector<int>{1, 2, 4};
  const std::vector<int> splits = prefill ? std::vector<int>{1} : std::vector<int>{1, 4, 8, 16};
  // 32-row warps (FlashAttention-2's: every K/V fragment feeds two m-tiles) for prefill.
  const std::vector<int> wrs = prefill && s.dim <= 64 ? std::vector<int>{16, 32} : std::vector<int>{16};
  for (int wr : wrs) {
    for (int bm : bms) {
      for (int bn : bns) {
        for (int wn : wns) {
          for (int stages : {2, 3, 4}) {
            for (int split : splits) {
              Config c;
              c.op = s.op, c.atom = Atom::kM16n8k16, c.bm = bm, c.bn = bn, c.wn = wn, c.wr = wr, c.stages = stages;
              c.split = split;
              const bool seen = std::find(out.begin(), out.end(), c) != out.end();
              if (!seen && !c.invalid_reason(s)) out.push_back(c);
            }
          }
        }
      }
    }
  }
  return out;
}

// The m16n8k16 atom serves attention ops (not kv_write) on sm_80+ (its GPU tests passed on the
// H200, 2026-11-30).
bool offers_m16n8k16(const Spec& s, Arch arch) {
  return s.op != Op::kKvWrite && arch.has_mma_m16n8k16();
}

}  // namespace

Config default_config(const Spec& s, int64_t m, Arch arch) {
  if (offers_m16n8k16(s, arch)) return m16n8k16_default(s, m);
  Config c;
  c.op = s.op;
  if (s.op == Op::kKvWrite) return c;
  // The widest key tile that fits; decode/verify: one warp column (the H200 sweep's best)
  // and enough splits to fill the GPU.
  // Prefill: 128 rows (8 warps) once there are that many (H200 sweep at 4K tokens: bm=128,bn=32
  // 1764 µs, bm=64,bn=16 1843 µs).
  const int first_bm = s.op == Op::kPrefill ? (std::max<int64_t>(m, 1) * s.group() > 64 ? 128 : 64) : decode_bm(s);
  if (s.op != Op::kPrefill) {
    const int64_t ctas = std::max<int64_t>(1, m) * s.kv_heads;
    c.split = std::clamp(pow2_ceil((kTargetCtas + ctas - 1) / ctas), 1, kMaxDefaultSplit);
  }
  // (bn, wn), preferred first. Decode's extra row warps (padding rows) only load, so a
  // few query rows still get enough loads in flight.
  const std::vector<std::pair<int, int>> shapes =
      s.op == Op::kPrefill ? std::vector<std::pair<int, int>>{{64, 1}, {32, 1}, {16, 1}}
                           : std::vector<std::pair<int, int>>{{32, 1}, {16, 1}, {32, 2}, {16, 2}, {32, 4}, {16, 4}};
  for (int bm = first_bm; bm <= 128; bm *= 2) {
    for (auto [bn, wn] : shapes) {
      c.bm = bm, c.bn = bn, c.wn = wn;
      if (!c.invalid_reason(s)) return c;
    }
  }
  throw InputError(s.to_string() + " has no valid config");
}

std::vector<Config> candidate_configs(const Spec& s, Arch arch) {
  std::vector<Config> out;
  if (offers_m16n8k16(s, arch)) out = m16n8k16_candidates(s);
  if (s.op == Op::kKvWrite) {
    for (int t : {64, 128, 256, 512}) {
      Config c;
      c.op = s.op;
      c.threads = t;
      out.push_back(c);
    }
    return out;
  }
  const std::vector<int> splits = s.op == Op::kPrefill ? std::vector<int>{1} : std::vector<int>{1, 2, 4, 8, 16};
  const std::vector<int> wns = s.op == Op::kPrefill ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 4, 8};
  for (int bm : {16, 32, 64, 128}) {
    for (int bn : {16, 32, 64}) {
      for (int wn : wns) {
        for (int split : splits) {
          Config c;
          c.op = s.op, c.bm = bm, c.bn = bn, c.wn = wn, c.split = split;
          if (!c.invalid_reason(s)) out.push_back(c);
        }
      }
    }
  }
  return out;
}

bool fits_bucket(const Spec& s, const Config& c, int64_t m) {
  m = std::max<int64_t>(m, 1);
  if (s.op == Op::kKvWrite) return true;
  if (s.op == Op::kPrefill) return c.bm <= std::max<int64_t>(64, pow2_ceil(m * s.group()));
  // Splits only where batch × kv_heads leaves the GPU short of CTAs.
  return c.split == 1 || m * s.kv_heads * c.split <= 4 * kTargetCtas;
}

}  // namespace onecat::attention
