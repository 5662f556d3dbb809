#include "codegen/rmsnorm/config.h"

#include <algorithm>

#include "codegen/common/row_config.h"

namespace onecat::rmsnorm {

Config Config::parse(const Spec& spec, std::string_view text) { return row_config::parse<Config>(spec, text); }

std::string Config::to_string() const { return row_config::to_string(row_threads, vec, rows); }

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (auto why = row_config::common_invalid_reason(row_threads, vec, rows, spec.hidden)) return why;
  const int values = iters(spec) * vec;
  if (values > kMaxValuesPerThread) {
    return "each thread would hold " + std::to_string(values) + " values (max " + std::to_string(kMaxValuesPerThread) +
           "); raise row_threads or vec";
  }
  const int registers = std::min(kMaxRegistersPerThread, kRegistersPerSm / cta_threads());
  if (values > registers / 2) {
    return "each thread would hold " + std::to_string(values) + " values, but a " + std::to_string(cta_threads()) +
           "-thread CTA leaves " + std::to_string(registers) + " registers per thread (at most " +
           std::to_string(registers / 2) + " values)";
  }
  if (iters(spec) > kMaxIters) {
    return std::to_string(iters(spec)) + " loads per thread (max " + std::to_string(kMaxIters) +
           "); raise row_threads or vec";
  }
  return row_config::idle_reason(row_threads, vec, spec.hidden);
}

}  // namespace onecat::rmsnorm
