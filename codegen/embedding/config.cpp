#include "codegen/embedding/config.h"

#include "codegen/common/row_config.h"

namespace onecat::embedding {

Config Config::parse(const Spec& spec, std::string_view text) { return row_config::parse<Config>(spec, text); }

std::string Config::to_string() const { return row_config::to_string(row_threads, vec, rows); }

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (auto why = row_config::common_invalid_reason(row_threads, vec, rows, spec.hidden)) return why;
  if (iters(spec) > kMaxIters) {
    return std::to_string(iters(spec)) + " accesses per thread (max " + std::to_string(kMaxIters) +
           "); raise row_threads or vec";
  }
  return row_config::idle_reason(row_threads, vec, spec.hidden);
}

}  // namespace onecat::embedding
