#include "codegen/gemm/space.h"

#include <algorithm>

#include "runtime/cuda/error.h"

namespace onecat::gemm {
namespace {

// Enough CTAs to fill 80 V100 SMs (or 132 H100/H200 SMs) about twice.
constexpr int64_t kTargetCtas = 256;
// 16-byte chunks each lane reads per row: enough that the CTA-wide reduction is rare.
constexpr int64_t kChunksPerLane = 4;

}  // namespace

Config default_config(const Spec& spec, int64_t m) {
  Config c;
  c.mt = 1;
  while (c.mt < std::min<int64_t>(m, 16)) c.mt *= 2;
  // Eight rows per CTA share each load of x (fewer with many tokens: accumulators).
  c.rows = std::max(1, std::min(Config::kMaxWeightRegs / Config::kRegsPerChunk, Config::kMaxAccumulators / c.mt) / 2);
  if (spec.epilogue == Epilogue::kSiluMul) c.rows = std::max(1, c.rows / 2);
  while (c.rows > 1 && (spec.out_cols() + c.rows - 1) / c.rows < kTargetCtas) c.rows /= 2;
  // Enough chunks per lane that the reduction across the CTA is paid rarely.
  const int64_t chunks = spec.k / spec.per_chunk();
  c.warps = 1;
  while (c.warps < 8 && chunks / (int64_t(c.warps) * 2 * 32) >= kChunksPerLane) c.warps *= 2;
  if ((spec.out_cols() + c.rows - 1) / c.rows < kTargetCtas) c.warps = std::min(c.warps * 2, 16);
  while (c.warps > 1 && c.invalid_reason(spec)) c.warps /= 2;
  if (auto why = c.invalid_reason(spec)) throw InputError(spec.to_string() + " has no valid gemv config: " + *why);
  return c;
}

std::vector<Config> candidate_configs(const Spec& spec) {
  std::vector<Config> out;
  for (int mt : {1, 2, 4, 8, 16}) {
    for (int rows : {1, 2, 4, 8}) {
      for (int warps : {1, 2, 4, 8, 16}) {
        Config c{mt, rows, warps};
        if (!c.invalid_reason(spec)) out.push_back(c);
      }
    }
  }
  return out;
}

}  // namespace onecat::gemm
