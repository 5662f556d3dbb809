// Random weights in the kernel layout of a gemm spec's format (docs/gemm.md), with values in
// the range real checkpoints have, for GPU checks and benchmarks.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "codegen/gemm/spec.h"
#include "codegen/weight_format.h"

namespace onecat {

quant::PackedWeight random_packed_weight(const gemm::Spec& spec, std::mt19937_64& rng);

// A small, fast generator (SplitMix64) for bulk random inputs: the caches and weights of the
// checks and tunes run to hundreds of millions of values (std::mt19937_64 with a
// distribution took most of a minute for a 512-sequence attention check).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * 0x1p-24f; }  // [lo, hi)
};

// Indices [0, n) in fixed chunks of kRandomChunk filled in parallel: fill(begin, end, stream)
// with a stream seeded from one draw of rng and the chunk's index, so the values depend on
// rng's state alone, not on the number of threads.
inline constexpr int64_t kRandomChunk = int64_t(1) << 16;
void fill_random_chunks(std::mt19937_64& rng, size_t n, const std::function<void(size_t, size_t, SplitMix64&)>& fill);

// n fp16 values (as bits) drawn uniformly from [lo, hi) (fill_random_chunks; one draw of rng),
// returned or written to out (n · 2 bytes, any alignment).
std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float lo, float hi);
void random_half_into(std::mt19937_64& rng, void* out, size_t n, float lo, float hi);

}  // namespace onecat
