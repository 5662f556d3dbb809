#include "codegen/sampling/emit.h"

#include "base/error.h"

namespace onecat::sampling {

Emitted emit(const Spec& spec, const Config& config, Arch arch) {
  Emitted e;
  const std::string v = std::to_string(spec.vocab), t = std::to_string(config.threads);
  std::string body;
  if (spec.op == Op::kSample) {
    e.kernel_expression = "onecat::sampling::sample_kernel<" + v + ", " + std::to_string(spec.logprobs) + ", " + t +
                          ", " + std::to_string(config.cap) + ">";
    body = "sampling/sample.cuh";
  } else {
    e.kernel_expression = "onecat::sampling::argmax_kernel<" + v + ", " + t + ", " + std::to_string(config.vec) + ", " +
                          std::to_string(config.unroll) + ", " + std::to_string(config.split) + ">";
    body = "sampling/argmax.cuh";
  }
  e.source = "// onecat sampling generator v" + std::to_string(kGeneratorVersion) + "\n// spec:   " + spec.to_string() +
             "\n// config: " + config.to_string() + "\n// arch:   " + arch.name() + "\n#include \"" + body + "\"\n";
  return e;
}

LaunchGeometry geometry(const Spec& spec, const Config& config, int64_t rows) {
  if (rows < 1) throw InputError("sampling needs at least one row (got " + std::to_string(rows) + ")");
  if (rows > 0x7fffffff) throw InputError("sampling: " + std::to_string(rows) + " rows exceed the grid limit");
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(rows);
  if (spec.op == Op::kArgmax) g.grid[1] = static_cast<unsigned>(config.split);
  g.block[0] = static_cast<unsigned>(config.threads);
  g.dynamic_shared_bytes = static_cast<unsigned>(config.shared_bytes(spec));
  return g;
}

}  // namespace onecat::sampling
