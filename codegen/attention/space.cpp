#include "codegen/attention/space.h"

#include <algorithm>

#include "base/error.h"
#include "codegen/tokens.h"

namespace onecat::attention {
namespace {

// Split-KV on the WMMA kernel aims at this many CTAs when batch × kv_heads alone is fewer: each CTA streams its
// keys one short tile at a time, so many CTAs must be in flight (split sweep: docs/attention.md).
constexpr int64_t kTargetCtas = 1024;
// The m16n8k16 kernel aims at 256, fp16 and fp8 alike: its cp.async stages keep enough bytes
// in flight per CTA, and every best config of the sweep over batch 1/8/32 × 1K/8K/32K split
// to 128–256 CTAs, while 512 and 1024 took longer (docs/attention.md).
constexpr int64_t kTargetCtasM16n8k16 = 256;
constexpr int kMaxDefaultSplit = 16;
// A decode whose 16 splits make fewer CTAs than this takes up to kMaxFewSplit (fp16 KV; below).
constexpr int64_t kFewCtas = 128;
constexpr int kMaxFewSplit = 32;

int round16(int v) { return (v + 15) / 16 * 16; }

// The rows a decode/verify CTA starts from: every query row of a sequence, at most 64.
int decode_bm(const Spec& s) {
  int bm = 16;
  while (bm < std::min(64, round16(s.q * s.group()))) bm *= 2;
  return bm;
}

// The fewest keys per split the candidates try: the default, and at 16 and 32 splits also 64,
// so a batch-1 decode over ~1K keys can spread over 16 splits instead of 4 (whether that beats
// the merge it adds is the tuner's measurement).
std::vector<int> split_min_keys(int split) {
  if (split >= 16) return {Config::kDefaultMinKeys, 64};
  return {Config::kDefaultMinKeys};
}

struct Shape {
  int bm, bn, wn, stages, wr = 16;
  int split = 0;  // 0: the op's default split
};

// atom=m16n8k16 (sm_80+), ranked by the H200 sweeps (figures: docs/attention.md). Prefill:
// D = 128 takes 64 rows of 4 warps × 64 keys, two stages; D = 64 128 rows of 32-row warps
// (every K/V fragment feeds two m-tiles); D = 256 (Q staying in shared memory) 128 rows of
// 8 warps × 64 keys where the target grants its 192 KiB, else 64 × 32 (sm_80, sm_86/89).
// Decode/verify: the sequence's rows, warp columns that take side-by-side key tiles, many
// stages (bytes in flight per SM are what a memory-bound kernel needs); fp8 decode 32-key
// tiles of four warp columns, verify 32-key tiles of two (each the best at every point with
// batch ≥ 8).
// The config runs on arch: valid, and its shared memory within what arch grants a CTA.
bool runs_on(const Spec& s, const Config& c, Arch arch) {
  return !c.invalid_reason(s) && (c.atom != Atom::kM16n8k16 || c.shared_bytes(s) <= arch.max_shared_bytes_per_cta());
}

Config m16n8k16_default(const Spec& s, int64_t m, Arch arch) {
  Config c;
  c.op = s.op;
  c.atom = Atom::kM16n8k16;
  std::vector<Shape> shapes;
  if (s.op == Op::kPrefill) {
    const bool wide = std::max<int64_t>(m, 1) * s.group() > 64;
    if (wide && s.dim <= 64) shapes.push_back({128, 64, 1, 2, 32});
    if (wide && s.dim > 128) shapes.push_back({128, 64, 1, 2});  // 192 KiB: sm_90
    if (s.dim <= 128) shapes.push_back({64, 64, 1, 2});          // D = 256: 160 KiB, and slower than 64 × 32
    shapes.insert(shapes.end(), {{64, 32, 1, 2}, {64, 16, 1, 2}});
  } else {
    const int64_t ctas = std::max<int64_t>(1, m) * s.kv_heads;
    c.split = int(std::min<int64_t>(pow2_ceil((kTargetCtasM16n8k16 + ctas - 1) / ctas), kMaxDefaultSplit));
    const int bm = decode_bm(s);
    // (4, 3) after (2, 4): at fp8 D=128 it spills 4 bytes with NVRTC 12.8 for sm_90.
    shapes = {{bm, 16, 2, 4}, {bm, 16, 4, 3}, {bm, 16, 4, 2}, {bm, 16, 2, 3},
              {bm, 16, 2, 2}, {bm, 16, 1, 4}, {bm, 16, 1, 2}};
    if (s.op == Op::kDecode && s.kv == KvType::kF16 && ctas * kMaxDefaultSplit < kFewCtas) {
      // Fewer (sequence, KV head) pairs than 16 splits bring to kFewCtas (a batch-1 decode of
      // 4 KV heads): up to 32 splits of four warp columns, which beat 16 splits of two at 1K,
      // 8K and 32K keys on an H100, where 32 splits of two columns lost, and so did 32 splits
      // once 16 already made 128 CTAs (docs/attention.md).
      const int few_split = int(std::min<int64_t>(pow2_ceil((kFewCtas + ctas - 1) / ctas), kMaxFewSplit));
      shapes.insert(shapes.begin(), Shape{bm, 16, 4, 3, 16, few_split});
    }
    if (s.op == Op::kDecode && s.kv != KvType::kF16) shapes.insert(shapes.begin(), Shape{bm, 32, 4, 2});
    if (s.op == Op::kVerify) shapes.insert(shapes.begin(), Shape{bm, 32, 2, 2});
  }
  const int split = c.split;
  for (const Shape& sh : shapes) {
    c.bm = sh.bm, c.bn = sh.bn, c.wn = sh.wn, c.stages = sh.stages, c.wr = sh.wr;
    c.split = sh.split ? sh.split : split;
    if (runs_on(s, c, arch)) return c;
  }
  throw InputError(s.to_string() + " has no valid m16n8k16 config");
}

std::vector<Config> m16n8k16_candidates(const Spec& s, Arch arch) {
  std::vector<Config> out;
  const bool prefill = s.op == Op::kPrefill;
  const std::vector<int> bms =
      prefill ? std::vector<int>{64, 128} : std::vector<int>{decode_bm(s), std::min(64, 2 * decode_bm(s))};
  const std::vector<int> bns = prefill ? std::vector<int>{32, 64} : std::vector<int>{16, 32};
  const std::vector<int> wns = prefill ? std::vector<int>{1} : std::vector<int>{1, 2, 4};
  // 32 splits: a batch-1 decode of few KV heads (Qwen2.5-7B's 4) fills 128 CTAs only so.
  const std::vector<int> splits = prefill ? std::vector<int>{1} : std::vector<int>{1, 4, 8, 16, 32};
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
              for (int mk : split_min_keys(split)) {
                c.mk = mk;
                const bool seen = std::find(out.begin(), out.end(), c) != out.end();
                if (!seen && runs_on(s, c, arch)) out.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// The m16n8k16 atom serves attention ops (not kv_write) on sm_80+.
bool offers_m16n8k16(const Spec& s, Arch arch) { return s.op != Op::kKvWrite && arch.has_mma_m16n8k16(); }

}  // namespace

Config default_config(const Spec& s, int64_t m, Arch arch) {
  if (offers_m16n8k16(s, arch)) return m16n8k16_default(s, m, arch);
  Config c;
  c.op = s.op;
  if (s.op == Op::kKvWrite) return c;
  // The widest key tile that fits; decode/verify: one warp column (the H200 sweep's best)
  // and enough splits to fill the GPU.
  // Prefill: 128 rows (8 warps) once there are that many (the sweep's best at 4K tokens:
  // docs/attention.md).
  const int first_bm = s.op == Op::kPrefill ? (std::max<int64_t>(m, 1) * s.group() > 64 ? 128 : 64) : decode_bm(s);
  if (s.op != Op::kPrefill) {
    const int64_t ctas = std::max<int64_t>(1, m) * s.kv_heads;
    c.split = int(std::min<int64_t>(pow2_ceil((kTargetCtas + ctas - 1) / ctas), kMaxDefaultSplit));
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
  if (offers_m16n8k16(s, arch)) out = m16n8k16_candidates(s, arch);
  if (s.op == Op::kKvWrite) {
    for (int t : {64, 128, 256, 512}) {
      Config c;
      c.op = s.op;
      c.threads = t;
      out.push_back(c);
    }
    return out;
  }
  const std::vector<int> splits = s.op == Op::kPrefill ? std::vector<int>{1} : std::vector<int>{1, 2, 4, 8, 16, 32};
  const std::vector<int> wns = s.op == Op::kPrefill ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 4, 8};
  for (int bm : {16, 32, 64, 128}) {
    for (int bn : {16, 32, 64}) {
      for (int wn : wns) {
        for (int split : splits) {
          Config c;
          c.op = s.op, c.bm = bm, c.bn = bn, c.wn = wn, c.split = split;
          for (int mk : split_min_keys(split)) {
            c.mk = mk;
            if (!c.invalid_reason(s)) out.push_back(c);
          }
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
