// rope config: what the tuner varies.
//   vec=8,threads=256,tokens=1
// A head vector is rotated by a group of lanes, each holding vec pairs (element i and
// i + dim/2: two vec·2-byte accesses); the group is the power of two ≥ dim/2/vec lanes (at most
// a warp, so a q/k norm sums with shuffles). A CTA of `threads` threads takes `tokens` tokens,
// whose cos/sin it computes once into shared memory for every head.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "codegen/rope/spec.h"

namespace onecat::rope {

struct Config {
  static constexpr int kMaxCtaThreads = 1024;
  static constexpr int kMinCtaThreads = 32;  // whole warps: a head's lanes never straddle two
  static constexpr int kMaxTokens = 64;
  static constexpr int kWarpLanes = 32;
  // The per-token cos/sin table: tokens · dim/2 · 8 bytes of static shared memory, within the
  // 48 KB a CTA gets without opting in.
  static constexpr int kMaxSharedBytes = 48 * 1024;

  int vec = 8;
  int threads = 256;
  int tokens = 1;

  static Config parse(const Spec& spec, std::string_view text);  // parses and validates
  std::string to_string() const;
  // Why this config cannot run the spec, or nothing when it can.
  std::optional<std::string> invalid_reason(const Spec& spec) const;

  int chunks(const Spec& spec) const { return spec.dim / 2 / vec; }  // working lanes per head
  int lanes(const Spec& spec) const;                                 // the head's group: a power of two
  int shared_bytes(const Spec& spec) const { return tokens * spec.dim / 2 * 8; }
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace onecat::rope
