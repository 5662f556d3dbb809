#include "codegen/gemm/config.h"

#include "codegen/spec_text.h"
#include "runtime/cuda/error.h"

namespace onecat::gemm {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

std::optional<std::string> gemv_invalid(const Spec& spec, const Config& c) {
  if (!power_of_two(c.mt) || c.mt > 16) return "mt must be 1, 2, 4, 8 or 16";
  if (!power_of_two(c.rows) || c.rows > 8) return "rows must be 1, 2, 4 or 8";
  if (!power_of_two(c.warps) || c.warps > 16) return "warps must be 1, 2, 4, 8 or 16";
  if (c.slots(spec) * Config::kRegsPerChunk > Config::kMaxWeightRegs) {
    return "rows=" + std::to_string(c.rows) + " would hold " + std::to_string(c.slots(spec) * Config::kRegsPerChunk) +
           " registers of weight chunks (max " + std::to_string(Config::kMaxWeightRegs) + ")";
  }
  if (c.mt * c.slots(spec) > Config::kMaxAccumulators) {
    return "mt*rows = " + std::to_string(c.mt * c.slots(spec)) + " accumulators (max " +
           std::to_string(Config::kMaxAccumulators) + ")";
  }
  if (c.warps * c.mt * c.slots(spec) * 4 > Config::kMaxSharedBytes) return "the cross-warp reduction needs too much shared memory";
  const int64_t chunks = spec.k / spec.per_chunk();
  if (c.warps > 1 && chunks <= int64_t(c.warps / 2) * 32) return "more warps than K has chunks for";
  return std::nullopt;
}

std::optional<std::string> mma_invalid(const Spec& spec, const Config& c) {
  if (!power_of_two(c.bm) || c.bm < 16 || c.bm > 128) return "bm must be 16, 32, 64 or 128";
  if (!power_of_two(c.bn) || c.bn < 16 || c.bn > 256) return "bn must be 16, 32, 64, 128 or 256";
  if (!power_of_two(c.wm) || !power_of_two(c.wn) || c.wm * c.wn > 8) return "wm*wn must be 1, 2, 4 or 8 warps (powers of two)";
  if (c.bm % (16 * c.wm) != 0 || c.bn % (16 * c.wn) != 0) return "each warp needs whole 16×16 fragments (bm/wm and bn/wn multiples of 16)";
  const int fragments = (c.bm / c.wm / 16) * (c.bn / c.wn / 16);
  if (fragments * 8 > Config::kMaxMmaAccumulators) {
    return std::to_string(fragments * 8) + " accumulators per thread (max " + std::to_string(Config::kMaxMmaAccumulators) + ")";
  }
  if (spec.epilogue == Epilogue::kSiluMul && (c.bn / c.wn / 16) % 2 != 0) {
    return "epi=silu_mul needs an even number of 16-row fragments per warp along n (gate and up pairs)";
  }
  if (spec.k % Config::kMmaBk != 0) return "k must be a multiple of 32 for the mma strategy";
  const int shared = 2 * (c.bm + c.bn) * (Config::kMmaBk + Config::kMmaPad) * 2;
  if (shared > Config::kMaxSharedBytes) return "the tiles need " + std::to_string(shared) + " bytes of shared memory (max 48 KiB)";
  return std::nullopt;
}

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config '" + std::string(text) + "'");
  Config c;
  c.strategy = r.choice("strategy", {"gemv", "mma"}) == "mma" ? Strategy::kMma : Strategy::kGemv;
  if (c.strategy == Strategy::kGemv) {
    c.mt = static_cast<int>(r.integer("mt", 1, 16));
    c.rows = static_cast<int>(r.integer("rows", 1, 8));
    c.warps = static_cast<int>(r.integer("warps", 1, 16));
  } else {
    c.bm = static_cast<int>(r.integer("bm", 16, 128));
    c.bn = static_cast<int>(r.integer("bn", 16, 256));
    c.wm = static_cast<int>(r.integer("wm", 1, 8));
    c.wn = static_cast<int>(r.integer("wn", 1, 8));
  }
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config '" + std::string(text) + "' cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  if (strategy == Strategy::kGemv) {
    return join_fields({{"strategy", "gemv"}, {"mt", std::to_string(mt)}, {"rows", std::to_string(rows)}, {"warps", std::to_string(warps)}});
  }
  return join_fields({{"strategy", "mma"}, {"bm", std::to_string(bm)}, {"bn", std::to_string(bn)}, {"wm", std::to_string(wm)}, {"wn", std::to_string(wn)}});
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  return strategy == Strategy::kGemv ? gemv_invalid(spec, *this) : mma_invalid(spec, *this);
}

}  // namespace onecat::gemm
