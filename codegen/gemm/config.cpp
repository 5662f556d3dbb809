#include "codegen/gemm/config.h"

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::gemm {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

std::optional<std::string> gemv_invalid(const Spec& spec, const Config& c) {
  if (!power_of_two(c.mt) || c.mt > 16) return "mt must be 1, 2, 4, 8 or 16";
  if (!power_of_two(c.rows) || c.rows > 8) return "rows must be 1, 2, 4 or 8";
  if (c.warps < 1 || c.warps > 16) return "warps must be 1 to 16";
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

// split=S: S equal parts of K of whole K steps each (templates/gemm/split_k.cuh).
std::optional<std::string> split_invalid(const Spec& spec, const Config& c, int bk) {
  if (c.split < 1 || c.split > Config::kMaxSplit) return "split must be 1 to " + std::to_string(Config::kMaxSplit);
  if (c.split > 1 && spec.k % (int64_t(bk) * c.split) != 0) {
    return "split=" + std::to_string(c.split) + " needs k to be a multiple of " + std::to_string(bk * c.split) +
           " (split × bk=" + std::to_string(bk) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> mma16816_invalid(const Spec& spec, const Config& c) {
  if (!power_of_two(c.bm) || c.bm < 16 || c.bm > 256) return "bm must be 16, 32, 64, 128 or 256";
  if (!power_of_two(c.bn) || c.bn < 16 || c.bn > 256) return "bn must be 16, 32, 64, 128 or 256";
  if (!power_of_two(c.wm) || !power_of_two(c.wn) || c.wm * c.wn > 8) return "wm*wn must be 1, 2, 4 or 8 warps (powers of two)";
  if (c.bm % (16 * c.wm) != 0 || c.bn % (16 * c.wn) != 0) return "each warp needs whole 16×16 tiles (bm/wm and bn/wn multiples of 16)";
  const int accumulators = (c.bm / c.wm / 16) * (c.bn / c.wn / 8) * 4;
  if (accumulators > Config::kMaxMmaAccumulators) {
    return std::to_string(accumulators) + " accumulators per thread (max " + std::to_string(Config::kMaxMmaAccumulators) + ")";
  }
  if (spec.epilogue == Epilogue::kSiluMul && (c.bn / c.wn) % 32 != 0) {
    return "epi=silu_mul needs warps 32 weight rows wide or a multiple (gate and up pairs of 16)";
  }
  if (c.bk != 32 && c.bk != 64) return "bk must be 32 or 64";
  if (c.bk % spec.per_chunk() != 0) return "bk must hold whole " + std::to_string(spec.per_chunk()) + "-value weight chunks";
  if (spec.k % c.bk != 0) return "k must be a multiple of bk=" + std::to_string(c.bk);
  if (c.pipe != 1 && c.pipe != 2) return "pipe must be 1 or 2";
  if (c.pipe == 1 && (c.stages < 2 || c.stages > 4)) return "stages must be 2, 3 or 4 (pipe=1)";
  if (c.pipe == 2 && (c.stages < 2 || c.stages > 5)) return "stages must be 2, 3, 4 or 5";
  if (c.pipe == 1 && c.split != 1) return "split needs pipe=2 (pipe=1 has no split-K)";
  if (auto why = split_invalid(spec, c, c.bk)) return why;
  if (c.pipe == 2 && spec.format != quant::WeightFormat::kF16 && c.stages < 3) {
    return "fmt=" + std::string(quant::format_name(spec.format)) + " needs stages=3 or more with pipe=2 (its decode runs one step ahead of the math)";
  }
  const int shared = c.shared_bytes(spec);
  if (shared > Config::kMaxDynamicSharedBytes) {
    return "the buffers need " + std::to_string(shared) + " bytes of shared memory (max " +
           std::to_string(Config::kMaxDynamicSharedBytes) + ")";
  }
  if (c.pipe == 2 && accumulators == Config::kMaxMmaAccumulators && c.bk == 64) {
    // Measured with ptxas for sm_90: 128 accumulators, two fragment buffers and the cp.async
    // addresses of a 64-wide K step exceed 255 registers and spill.
    return "warp tiles of 64×64 need bk=32 (with bk=64 they spill registers)";
  }
  return std::nullopt;
}

std::optional<std::string> mma_invalid(const Spec& spec, const Config& c) {
  if (c.atom == Atom::kM16n8k16) return mma16816_invalid(spec, c);
  if (c.bk != Config::kMmaBk || c.stages != 2) return "atom=wmma has bk=32 and stages=2";
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
  if (auto why = split_invalid(spec, c, Config::kMmaBk)) return why;
  const int shared = 2 * (c.bm + c.bn) * (Config::kMmaBk + Config::kMmaPad) * 2;
  if (shared > Config::kMaxSharedBytes) return "the tiles need " + std::to_string(shared) + " bytes of shared memory (max 48 KiB)";
  return std::nullopt;
}

// templates/gemm/tc_small.cuh: k-blocks of four 16-byte chunks per row, split over the warps.
std::optional<std::string> tc_small_invalid(const Spec& spec, const Config& c) {
  if (c.mt != 8 && c.mt != 16) return "mt must be 8 or 16 (one or two 8-token mma operands)";
  if (c.rows != 16 && c.rows != 32 && c.rows != 64) return "rows must be 16, 32 or 64";
  if (!power_of_two(c.warps) || c.warps > 16) return "warps must be 1, 2, 4, 8 or 16";
  if (c.stages < 1 || c.stages > 4) return "stages must be 1 (registers) to 4";
  if (c.tc_small_accumulators(spec) > Config::kMaxTcSmallAccumulators) {
    return std::to_string(c.tc_small_accumulators(spec)) + " accumulators per thread (max " +
           std::to_string(Config::kMaxTcSmallAccumulators) + ")";
  }
  if (c.tc_small_accumulators(spec) + c.tc_small_stage_regs(spec) > Config::kMaxTcSmallAccumulatorAndStageRegs) {
    return std::to_string(c.tc_small_accumulators(spec)) + " accumulators and " + std::to_string(c.tc_small_stage_regs(spec)) +
           " registers of x and weights per k-block (max " + std::to_string(Config::kMaxTcSmallAccumulatorAndStageRegs) +
           " together)";
  }
  if (c.tc_small_stage_regs(spec) > Config::kMaxTcSmallStageRegs) {
    return "a k-block would hold " + std::to_string(c.tc_small_stage_regs(spec)) + " registers of x and weights (max " +
           std::to_string(Config::kMaxTcSmallStageRegs) + ")";
  }
  const int64_t blocks = (spec.k / spec.per_chunk() + 3) / 4;
  if (c.split < 1 || c.split > Config::kMaxSplit) return "split must be 1 to " + std::to_string(Config::kMaxSplit);
  if (blocks % c.split != 0) {
    return "split=" + std::to_string(c.split) + " needs K's " + std::to_string(blocks) +
           " k-blocks of four chunks to divide evenly";
  }
  if (blocks / c.split < c.warps) return "more warps than K has k-blocks of four chunks for (per split part)";
  if (c.tc_small_shared_bytes(spec) > Config::kMaxSharedBytes) {
    return "the weight ring or the cross-warp reduction needs " + std::to_string(c.tc_small_shared_bytes(spec)) +
           " bytes of shared memory (max 48 KiB)";
  }
  return std::nullopt;
}

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config " + quoted_input(text));
  Config c;
  const std::string strategy = r.choice("strategy", {"gemv", "mma", "tc_small", "cublas"});
  c.strategy = strategy == "mma"        ? Strategy::kMma
               : strategy == "tc_small" ? Strategy::kTcSmall
               : strategy == "cublas"   ? Strategy::kCublas
                                        : Strategy::kGemv;
  if (c.strategy == Strategy::kCublas) {
    // Nothing to choose: cuBLAS picks its own algorithm.
  } else if (c.strategy != Strategy::kMma) {
    c.mt = static_cast<int>(r.integer("mt", 1, 16));
    c.rows = static_cast<int>(r.integer("rows", 1, 64));
    c.warps = static_cast<int>(r.integer("warps", 1, 16));
    if (c.strategy == Strategy::kTcSmall) {
      c.stages = static_cast<int>(r.integer("stages", 1, 4));
      c.split = static_cast<int>(r.integer_or("split", 1, 1, Config::kMaxSplit));
    }
  } else {
    c.atom = r.choice_or("atom", "wmma", {"wmma", "m16n8k16"}) == "wmma" ? Atom::kWmma : Atom::kM16n8k16;
    c.bm = static_cast<int>(r.integer("bm", 16, 256));
    c.bn = static_cast<int>(r.integer("bn", 16, 256));
    c.wm = static_cast<int>(r.integer("wm", 1, 8));
    c.wn = static_cast<int>(r.integer("wn", 1, 8));
    if (c.atom == Atom::kM16n8k16) {
      c.bk = static_cast<int>(r.integer("bk", 16, 128));
      c.stages = static_cast<int>(r.integer("stages", 1, 8));
      c.pipe = static_cast<int>(r.integer_or("pipe", 1, 1, 2));
    }
    c.split = static_cast<int>(r.integer_or("split", 1, 1, Config::kMaxSplit));
  }
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config " + quoted_input(text) + " cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  if (strategy == Strategy::kCublas) return join_fields({{"strategy", "cublas"}});
  if (strategy != Strategy::kMma) {
    if (strategy == Strategy::kTcSmall) {
      std::vector<std::pair<std::string, std::string>> fields = {{"strategy", "tc_small"}, {"mt", std::to_string(mt)},
                                                                 {"rows", std::to_string(rows)}, {"warps", std::to_string(warps)},
                                                                 {"stages", std::to_string(stages)}};
      if (split != 1) fields.emplace_back("split", std::to_string(split));  // split=1 keeps its text (and cache keys)
      return join_fields(fields);
    }
    return join_fields({{"strategy", "gemv"}, {"mt", std::to_string(mt)}, {"rows", std::to_string(rows)}, {"warps", std::to_string(warps)}});
  }
  // split=1 configs keep their text (and cache keys).
  if (atom == Atom::kWmma) {
    std::vector<std::pair<std::string, std::string>> fields = {{"strategy", "mma"}, {"atom", "wmma"}, {"bm", std::to_string(bm)},
                                                               {"bn", std::to_string(bn)}, {"wm", std::to_string(wm)}, {"wn", std::to_string(wn)}};
    if (split != 1) fields.emplace_back("split", std::to_string(split));
    return join_fields(fields);
  }
  std::vector<std::pair<std::string, std::string>> fields = {
      {"strategy", "mma"}, {"atom", "m16n8k16"}, {"bm", std::to_string(bm)}, {"bn", std::to_string(bn)}, {"wm", std::to_string(wm)},
      {"wn", std::to_string(wn)}, {"bk", std::to_string(bk)}, {"stages", std::to_string(stages)}};
  if (pipe != 1) fields.emplace_back("pipe", std::to_string(pipe));  // pipe=1 configs keep their text (and cache keys)
  if (split != 1) fields.emplace_back("split", std::to_string(split));
  return join_fields(fields);
}

int Config::shared_bytes(const Spec& spec) const {
  if (strategy != Strategy::kMma || atom != Atom::kM16n8k16) return 0;
  // templates/gemm/mma16816_{padded,swizzled}.cuh Mma16816Smem: x stages; fp16 weight stages, or raw weight
  // stages plus two decoded fp16 tiles. fp16 rows: bk + kMmaPad halves (pipe=1), bk halves
  // swizzled (pipe=2).
  const int ld = pipe == 1 ? bk + kMmaPad : bk;
  const int x = stages * bm * ld * 2;
  if (spec.format == quant::WeightFormat::kF16) return x + stages * bn * ld * 2;
  return x + stages * bn * (bk / spec.per_chunk()) * 16 + 2 * bn * ld * 2;
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (spec.norm && strategy != Strategy::kGemv) return "norm=rms is fused into strategy=gemv only";
  switch (strategy) {
    case Strategy::kGemv: return gemv_invalid(spec, *this);
    case Strategy::kTcSmall: return tc_small_invalid(spec, *this);
    case Strategy::kCublas:
      if (spec.act_order) return "strategy=cublas takes weights in plain K order (not act_order)";
      return std::nullopt;
    case Strategy::kMma: break;
  }
  return mma_invalid(spec, *this);
}

}  // namespace onecat::gemm
