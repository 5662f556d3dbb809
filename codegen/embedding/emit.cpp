#include "codegen/embedding/emit.h"

#include "base/error.h"

namespace onecat::embedding {

Emitted emit(const Spec& spec, const Config& config, Arch arch) {
  Emitted e;
  e.kernel_expression = "onecat::embedding_kernel<" + std::to_string(spec.vocab) + ", " + std::to_string(spec.hidden) +
                        ", " + std::to_string(config.row_threads) + ", " + std::to_string(config.vec) + ", " +
                        std::to_string(config.rows) + ">";
  e.source = "// onecat embedding generator v" + std::to_string(kGeneratorVersion) +
             "\n// spec:   " + spec.to_string() + "\n// config: " + config.to_string() + "\n// arch:   " + arch.name() +
             "\n#include \"embedding/embedding.cuh\"\n";
  return e;
}

LaunchGeometry geometry(const Spec&, const Config& config, int64_t tokens) {
  if (tokens < 1) throw InputError("embedding needs at least one token (got " + std::to_string(tokens) + ")");
  const int64_t ctas = (tokens + config.rows - 1) / config.rows;
  if (ctas > 0x7fffffff) throw InputError("embedding: " + std::to_string(tokens) + " tokens exceed the grid limit");
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(ctas);
  g.block[0] = static_cast<unsigned>(config.cta_threads());
  return g;
}

}  // namespace onecat::embedding
