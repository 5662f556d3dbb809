#include "codegen/gemm/config.h"

#include "codegen/spec_text.h"
#include "runtime/cuda/error.h"

namespace onecat::gemm {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config '" + std::string(text) + "'");
  r.choice("strategy", {"gemv"});
  Config c;
  c.mt = static_cast<int>(r.integer("mt", 1, 16));
  c.rows = static_cast<int>(r.integer("rows", 1, 8));
  c.warps = static_cast<int>(r.integer("warps", 1, 16));
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config '" + std::string(text) + "' cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  return join_fields({{"strategy", "gemv"}, {"mt", std::to_string(mt)}, {"rows", std::to_string(rows)}, {"warps", std::to_string(warps)}});
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (!power_of_two(mt) || mt > 16) return "mt must be 1, 2, 4, 8 or 16";
  if (!power_of_two(rows) || rows > 8) return "rows must be 1, 2, 4 or 8";
  if (!power_of_two(warps) || warps > 16) return "warps must be 1, 2, 4, 8 or 16";
  if (slots(spec) * kRegsPerChunk > kMaxWeightRegs) {
    return "rows=" + std::to_string(rows) + " would hold " + std::to_string(slots(spec) * kRegsPerChunk) +
           " registers of weight chunks (max " + std::to_string(kMaxWeightRegs) + ")";
  }
  if (mt * slots(spec) > kMaxAccumulators) {
    return "mt*rows = " + std::to_string(mt * slots(spec)) + " accumulators (max " + std::to_string(kMaxAccumulators) + ")";
  }
  if (warps * mt * slots(spec) * 4 > kMaxSharedBytes) return "the cross-warp reduction needs too much shared memory";
  const int64_t chunks = spec.k / spec.per_chunk();
  if (warps > 1 && chunks <= int64_t(warps / 2) * 32) return "more warps than K has chunks for";
  return std::nullopt;
}

}  // namespace onecat::gemm
