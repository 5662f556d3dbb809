#include "codegen/rmsnorm/emit.h"

#include "base/error.h"

namespace onecat::rmsnorm {

Emitted emit(const Spec& spec, const Config& config, Arch arch) {
  Emitted e;
  e.kernel_expression = "onecat::rmsnorm_kernel<" + std::to_string(spec.hidden) + ", " +
                        (spec.residual ? "true" : "false") + ", " + std::to_string(config.row_threads) + ", " +
                        std::to_string(config.vec) + ", " + std::to_string(config.rows) + ">";
  e.source = "// onecat rmsnorm generator v" + std::to_string(kGeneratorVersion) + "\n// spec:   " + spec.to_string() +
             "\n// config: " + config.to_string() + "\n// arch:   " + arch.name() +
             "\n#include \"rmsnorm/rmsnorm.cuh\"\n";
  return e;
}

LaunchGeometry geometry(const Spec&, const Config& config, int64_t rows) {
  if (rows < 1) throw InputError("rmsnorm needs at least one row (got " + std::to_string(rows) + ")");
  LaunchGeometry g;
  int64_t ctas = (rows + config.rows - 1) / config.rows;
  if (ctas > 0x7fffffff) throw InputError("rmsnorm: " + std::to_string(rows) + " rows exceed the grid limit");
  g.grid[0] = static_cast<unsigned>(ctas);
  g.block[0] = static_cast<unsigned>(config.cta_threads());
  return g;
}

}  // namespace onecat::rmsnorm
