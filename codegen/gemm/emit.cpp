#include "codegen/gemm/emit.h"

#include <algorithm>

#include "base/error.h"

namespace onecat::gemm {

std::string format_type(const Spec& s) {
  const std::string k = std::to_string(s.k);
  switch (s.format) {
    case WeightFormat::kF16: return "onecat::FmtF16";
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4:
      return "onecat::FmtInt4<" + k + ", " + std::to_string(s.group) + ">";
    case WeightFormat::kFp8B32: return "onecat::FmtFp8B32<" + k + ">";
    case WeightFormat::kFp8B128: return "onecat::FmtFp8B128<" + k + ", " + std::to_string(s.group) + ">";
    case WeightFormat::kNvfp4: return "onecat::FmtNvfp4<" + k + ">";
    case WeightFormat::kMxfp4: return "onecat::FmtMxfp4<" + k + ">";
  }
  throw Error("unknown weight format");
}

Emitted emit(const Spec& spec, const Config& c, Arch arch) {
  Emitted e;
  const std::string tail = std::string(spec.out_f32 ? "true" : "false") + ", " +
                           std::to_string(static_cast<int>(spec.epilogue)) + ", " + (spec.act_order ? "true" : "false") + ">";
  const std::string shape = format_type(spec) + ", " + std::to_string(spec.n) + ", " + std::to_string(spec.k) + ", ";
  std::string header;
  if (c.strategy == Strategy::kCublas) {
    e.kernel_expression = "onecat::cublas_aux_kernel<" + format_type(spec) + ", " + std::to_string(spec.n) + ", " +
                          std::to_string(spec.k) + ", " + (spec.out_f32 ? "true" : "false") + ", " +
                          std::to_string(static_cast<int>(spec.epilogue)) + ">";
    header = "gemm/cublas_aux.cuh";
  } else if (c.strategy == Strategy::kGemv) {
    // NORM is written out even when false: the lowered name always carries it, and `cache
    // import --verify` checks that name against this expression.
    e.kernel_expression = "onecat::gemv_kernel<" + shape + std::to_string(c.mt) + ", " + std::to_string(c.rows) + ", " +
                          std::to_string(c.warps) + ", " + tail.substr(0, tail.size() - 1) +
                          (spec.norm ? ", true>" : ", false>");
    header = "gemm/gemv.cuh";
  } else if (c.strategy == Strategy::kTcSmall) {
    if (!arch.has_mma_m16n8k16()) {
      throw InputError("config " + c.to_string() + " runs on mma.m16n8k16, which needs sm_80 or newer (not " + arch.name() +
                       "); use strategy=gemv");
    }
    e.kernel_expression = "onecat::tc_small_kernel<" + shape + std::to_string(c.mt) + ", " + std::to_string(c.rows) + ", " +
                          std::to_string(c.warps) + ", " + std::to_string(c.stages) + ", " + std::to_string(c.split) + ", " + tail;
    header = "gemm/tc_small.cuh";
  } else if (c.atom == Atom::kWmma) {
    e.kernel_expression = "onecat::mma_kernel<" + shape + std::to_string(c.bm) + ", " + std::to_string(c.bn) + ", " +
                          std::to_string(c.wm) + ", " + std::to_string(c.wn) + ", " + std::to_string(c.split) + ", " + tail;
    header = "gemm/mma.cuh";
  } else {
    if (!arch.has_mma_m16n8k16()) {
      throw InputError("config " + c.to_string() + " uses the m16n8k16 atom, which needs sm_80 or newer (not " + arch.name() +
                       "); use atom=wmma");
    }
    // pipe=1: padded shared rows (mma16816_padded.cuh); pipe=2: swizzled rows, the decode a step
    // ahead, and split-K (mma16816_swizzled.cuh). Each in its own namespace.
    const std::string body = c.pipe == 2 ? "onecat::swizzled::" : "onecat::padded::";
    e.kernel_expression = body + "mma16816_kernel<" + shape + std::to_string(c.bm) + ", " + std::to_string(c.bn) +
                          ", " + std::to_string(c.bk) + ", " + std::to_string(c.wm) + ", " + std::to_string(c.wn) + ", " +
                          std::to_string(c.stages) + ", " +
                          (c.pipe == 2 ? std::to_string(c.split) + ", " : std::string()) + tail;
    header = c.pipe == 2 ? "gemm/mma16816_swizzled.cuh" : "gemm/mma16816_padded.cuh";
  }
  e.source = "// onecat gemm generator v" + std::to_string(kGeneratorVersion) + "\n// spec:   " + spec.to_string() +
             "\n// config: " + c.to_string() + "\n// arch:   " + arch.name() + "\n#include \"" + header + "\"\n";
  return e;
}

LaunchGeometry geometry(const Spec& spec, const Config& c, int64_t m) {
  if (m < 1) throw InputError("gemm needs at least one token (m=" + std::to_string(m) + ")");
  if (c.strategy == Strategy::kCublas) return cublas_aux_geometry(spec, CublasPhase::kEpilogue, m);
  LaunchGeometry g;
  const bool gemv_like = c.strategy != Strategy::kMma;  // gemv and tc_small: rows × mt tiles, weight tiles along x
  const int64_t cols = gemv_like ? c.rows : (spec.epilogue == Epilogue::kSiluMul ? c.bn / 2 : c.bn);
  const int64_t tile_m = gemv_like ? c.mt : c.bm;
  const int64_t col_tiles = (spec.out_cols() + cols - 1) / cols;
  const int64_t tiles = (m + tile_m - 1) / tile_m;
  if (gemv_like) {
    if (tiles > 65535) throw InputError("gemm: m=" + std::to_string(m) + " exceeds the grid's token tiles");
    g.grid[0] = static_cast<unsigned>(col_tiles), g.grid[1] = static_cast<unsigned>(tiles);
    if (c.strategy == Strategy::kTcSmall) g.grid[2] = static_cast<unsigned>(c.split);
  } else {
    // mma: token tiles along x (templates/gemm/mma*.cuh), weight tiles along y.
    if (col_tiles > 65535) throw InputError("gemm: " + spec.to_string() + " has too many weight tiles for the grid");
    g.grid[0] = static_cast<unsigned>(tiles), g.grid[1] = static_cast<unsigned>(col_tiles);
    g.grid[2] = static_cast<unsigned>(c.split);
  }
  g.block[0] = static_cast<unsigned>(c.threads());
  g.dynamic_shared_bytes = static_cast<unsigned>(c.shared_bytes(spec));
  return g;
}

LaunchGeometry cublas_aux_geometry(const Spec& spec, CublasPhase phase, int64_t rows) {
  const int64_t items =
      phase == CublasPhase::kDequantise ? spec.n * (spec.k / spec.per_chunk()) : rows * spec.out_cols();
  const int64_t blocks = (items + Config::kCublasAuxThreads - 1) / Config::kCublasAuxThreads;
  if (blocks > int64_t(0x7fffffff)) throw InputError("gemm: " + spec.to_string() + " is too large for strategy=cublas");
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(std::max<int64_t>(blocks, 1));
  g.block[0] = Config::kCublasAuxThreads;
  return g;
}

int64_t workspace_counters(const Spec& spec, const Config& c, int64_t m) {
  if (c.strategy == Strategy::kGemv || c.strategy == Strategy::kCublas || c.split == 1) return 0;
  const LaunchGeometry g = geometry(spec, c, m);
  return int64_t(g.grid[0]) * g.grid[1];
}

int64_t workspace_floats(const Spec& spec, const Config& c, int64_t m) {
  const int64_t per_part = c.strategy == Strategy::kTcSmall ? c.tc_small_partial_floats(spec) : int64_t(c.bm) * c.bn;
  return workspace_counters(spec, c, m) * c.split * per_part;
}

}  // namespace onecat::gemm
