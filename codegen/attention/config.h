// attention config: what the tuner varies.
//   prefill, decode, verify:  bm=16,bn=16,wn=4,split=4                         atom=wmma (any arch; sm_70's)
//                             atom=m16n8k16,bm=64,bn=64,wn=1,stages=2,split=1  sm_80+ (attention_sm80.cuh)
//                             atom=m16n8k16,bm=128,bn=64,wn=1,wr=32,...       32-row warps (D = 64)
//                             …,split=16,mk=64: splits of at least 64 keys (default 256)
//   kv_write:                 threads=256
// A CTA holds bm query rows of one sequence and one KV head (a row is one (token, query head)
// pair, so the query heads of a KV head share every K/V load: GQA packing), in bm/16 warp
// rows of 16 (m16n8k16: wr rows, 16 or 32); wn warp columns take turns over the key range in tiles of bn keys and merge
// at the end; split CTAs share a sequence's key range and merge in fp32 through a workspace
// (decode and verify only). atom=wmma (the text without `atom`): WMMA m16n16k16, register
// double buffering, S and P through shared memory. atom=m16n8k16: mma.sync with ldmatrix,
// `stages` cp.async K/V buffers, S and P in registers.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/attention/spec.h"

namespace onecat::attention {

enum class Atom { kWmma, kM16n8k16 };

struct Config {
  // Volta's opt-in shared-memory limit per CTA (VOLTA.md: 96 KB per SM), the WMMA kernel's.
  static constexpr int kMaxSharedBytes = 96 * 1024;
  // The m16n8k16 kernel's: the most any sm_80+ part grants (sm_90: 227 KiB); a config over the
  // target's own limit (Arch::max_shared_bytes_per_cta) is refused at emit and never offered.
  static constexpr int kMaxSharedBytesM16n8k16 = 227 * 1024;
  static constexpr int kMaxThreads = 256;  // 256 registers per thread at 256 threads
  // The next K/V tile waits in registers during the current tile's math (register double
  // buffering, no cp.async on sm_70): at most 16 registers of it per thread (32 already
  // spilled next to D=128's 64 output accumulators: ptxas for sm_70, NVRTC 12.8).
  static constexpr int kMaxPrefetchBytes = 64;
  static constexpr int kMaxSplit = 64;
  // The fewest keys a split takes (templates/attention/cta.cuh kSplitMinKeys), so a short
  // context runs on fewer splits; `mk` sets another (a power of two, split > 1 only).
  static constexpr int kDefaultMinKeys = 256;

  Op op = Op::kDecode;
  Atom atom = Atom::kWmma;                  // attention ops
  int bm = 16, bn = 16, wn = 4, split = 1;  // attention ops
  int stages = 2;                           // atom=m16n8k16 (wmma: 2, register double buffering)
  int wr = 16;               // atom=m16n8k16: rows per warp, 16 or 32 (two m-tiles share each K/V fragment)
  int mk = kDefaultMinKeys;  // attention ops with split > 1: the fewest keys per split
  int threads = 256;         // kv_write

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int warps() const { return bm / wr * wn; }
  int cta_threads() const { return op == Op::kKvWrite ? threads : warps() * 32; }
  int shared_bytes(const Spec& spec) const;  // dynamic shared memory of one CTA
  int prefetch_bytes(const Spec& spec) const;
  std::optional<std::string> m16n8k16_invalid_reason(const Spec& spec) const;
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::attention
