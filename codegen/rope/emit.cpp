#include "codegen/rope/emit.h"

#include "base/error.h"

namespace onecat::rope {

Emitted emit(const Spec& spec, const Config& config, Arch arch) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  Emitted e;
  e.kernel_expression = "onecat::rope_kernel<" + std::to_string(spec.heads) + ", " + std::to_string(spec.kv_heads) +
                        ", " + std::to_string(spec.dim) + ", " + b(spec.qk_norm) + ", " + b(spec.paged) + ", " +
                        std::to_string(spec.paged ? spec.page : 1) + ", " + std::to_string(int(spec.kv)) + ", " +
                        b(spec.kv_scale == attention::KvScale::kHead) + ", " + std::to_string(config.vec) + ", " +
                        std::to_string(config.threads) + ", " + std::to_string(config.tokens) + ">";
  e.source = "// onecat rope generator v" + std::to_string(kGeneratorVersion) + "\n// spec:   " + spec.to_string() +
             "\n// config: " + config.to_string() + "\n// arch:   " + arch.name() + "\n#include \"rope/rope.cuh\"\n";
  return e;
}

LaunchGeometry geometry(const Spec&, const Config& config, int64_t tokens) {
  if (tokens < 1) throw InputError("rope needs at least one token (got " + std::to_string(tokens) + ")");
  const int64_t ctas = (tokens + config.tokens - 1) / config.tokens;
  if (ctas > 0x7fffffff) throw InputError("rope: " + std::to_string(tokens) + " tokens exceed the grid limit");
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(ctas);
  g.block[0] = static_cast<unsigned>(config.threads);
  return g;
}

}  // namespace onecat::rope
