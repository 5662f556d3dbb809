#include "codegen/moe/emit.h"

#include <algorithm>

#include "base/error.h"
#include "codegen/gemm/emit.h"

namespace onecat::moe {

Emitted emit(const Spec& spec, const Config& c, Arch arch) {
  Emitted e;
  std::string header;
  const std::string topk = std::to_string(spec.topk);
  switch (spec.op) {
    case Op::kRoute:
      e.kernel_expression = "onecat::moe_route_kernel<" + std::to_string(spec.experts) + ", " + topk + ", " +
                            (spec.norm ? "true" : "false") + ", " + std::to_string(c.threads) + ", " +
                            std::to_string(c.tokens) + ", " + (spec.sigmoid ? "true" : "false") + ", " +
                            (spec.bias ? "true" : "false") + ", " + std::to_string(spec.groups) + ", " +
                            std::to_string(spec.topk_groups) + ">";
      header = "moe/route.cuh";
      break;
    case Op::kCombine:
      e.kernel_expression = "onecat::moe_combine_kernel<" + std::to_string(spec.hidden) + ", " + topk + ", " +
                            std::to_string(c.threads) + ", " + std::to_string(int(spec.shared)) + ">";
      header = "moe/combine.cuh";
      break;
    case Op::kDecode: {
      auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
      e.kernel_expression =
          "onecat::moe_decode_kernel<" + gemm::format_type(spec.projection(Op::kGateUp)) + ", " +
          gemm::format_type(spec.projection(Op::kDown)) + ", " + std::to_string(spec.hidden) + ", " +
          std::to_string(spec.inter) + ", " + std::to_string(spec.experts) + ", " + topk + ", " + flag(spec.norm) +
          ", " + flag(spec.sigmoid) + ", " + flag(spec.bias) + ", " + std::to_string(spec.groups) + ", " +
          std::to_string(spec.topk_groups) + ", " + std::to_string(c.warps) + ", " + std::to_string(c.rows) + ", " +
          std::to_string(c.down_rows) + ", " + std::to_string(c.groups) + ", " + std::to_string(int(spec.shared)) +
          ", " + flag(spec.act_order) + ", " + flag(c.interleave) + ", " + std::to_string(c.occ) + ">";
      header = "moe/decode.cuh";
      break;
    }
    case Op::kGateUp:
    case Op::kDown: {
      const gemm::Spec g = spec.projection();
      const std::string shape = gemm::format_type(g) + ", " + std::to_string(g.n) + ", " + std::to_string(g.k) + ", " +
                                std::to_string(spec.experts) + ", " + topk + ", ";
      const std::string flags = std::string(spec.op == Op::kGateUp ? "true" : "false") + ", " +
                                (spec.act_order ? "true" : "false") + ">";
      if (c.tc_small()) {
        if (!arch.has_mma_m16n8k16()) {
          throw InputError("config " + c.to_string() + " runs on mma.m16n8k16, which needs sm_80 or newer (not " +
                           arch.name() + "); use strategy=gemv or mma");
        }
        e.kernel_expression = "onecat::moe_tc_small_kernel<" + shape + std::to_string(c.mt) + ", " +
                              std::to_string(c.rows) + ", " + std::to_string(c.warps) + ", " +
                              std::to_string(c.stages) + ", " + flags;
        header = "moe/tc_small.cuh";
      } else if (c.mma()) {
        e.kernel_expression = "onecat::moe_mma_kernel<" + shape + std::to_string(c.bm) + ", " + std::to_string(c.bn) +
                              ", " + std::to_string(c.wm) + ", " + std::to_string(c.wn) + ", " + flags;
        header = "moe/mma.cuh";
      } else {
        e.kernel_expression = "onecat::moe_gemv_kernel<" + shape + std::to_string(c.mt) + ", " +
                              std::to_string(c.rows) + ", " + std::to_string(c.warps) + ", " + std::to_string(c.loop) +
                              ", " + std::to_string(c.groups) + ", " + std::to_string(c.occ) + ", " + flags;
        header = "moe/gemv.cuh";
      }
      break;
    }
  }
  e.source = "// onecat moe generator v" + std::to_string(kGeneratorVersion) + "\n// spec:   " + spec.to_string() +
             "\n// config: " + c.to_string() + "\n// arch:   " + arch.name() + "\n#include \"" + header + "\"\n";
  return e;
}

int64_t max_tiles(const Spec& spec, const Config& c, int64_t pairs) {
  // Σ ceil(c_e / t) over the experts with pairs ≤ Σ (c_e + t - 1) / t = (pairs + touched·(t - 1)) / t,
  // touched ≤ min(experts, pairs); the sum is whole, so its floor bounds it too.
  const int64_t t = c.tile_pairs();
  return (pairs + std::min<int64_t>(spec.experts, pairs) * (t - 1)) / t;
}

LaunchGeometry geometry(const Spec& spec, const Config& c, int64_t tokens) {
  if (tokens < 1) throw InputError("moe needs at least one token (got " + std::to_string(tokens) + ")");
  LaunchGeometry g;
  g.block[0] = static_cast<unsigned>(c.cta_threads());
  switch (spec.op) {
    case Op::kRoute:
      if (c.route_ctas(tokens) > 0x7fffffff) throw InputError("moe route: too many tokens for the grid");
      g.grid[0] = static_cast<unsigned>(c.route_ctas(tokens));
      break;
    case Op::kCombine:
      if (tokens > 0x7fffffff) throw InputError("moe combine: too many tokens for the grid");
      g.grid[0] = static_cast<unsigned>(tokens);
      break;
    case Op::kDecode: {
      const int64_t ctas = tokens * spec.topk * (c.decode_blocks(spec, Op::kGateUp) + c.decode_blocks(spec, Op::kDown));
      if (ctas > 0x7fffffff) throw InputError("moe decode: " + std::to_string(tokens) + " tokens exceed the grid");
      g.grid[0] = static_cast<unsigned>(ctas);
      break;
    }
    case Op::kGateUp:
    case Op::kDown: {
      const int64_t out_rows = spec.projection().out_cols();
      const int64_t tiles = max_tiles(spec, c, tokens * spec.topk);
      if (tiles > 65535) throw InputError("moe: " + std::to_string(tokens) + " tokens exceed the grid's tiles");
      g.grid[0] = static_cast<unsigned>((out_rows + c.tile_cols() - 1) / c.tile_cols());
      g.grid[1] = static_cast<unsigned>(tiles);
      break;
    }
  }
  return g;
}

}  // namespace onecat::moe
