#include "codegen/rmsnorm/config.h"

#include <algorithm>

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::rmsnorm {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config " + quoted_input(text));
  Config c;
  c.row_threads = static_cast<int>(r.integer("row_threads", 1, kMaxCtaThreads));
  c.vec = static_cast<int>(r.integer("vec", 1, 8));
  c.rows = static_cast<int>(r.integer("rows", 1, kMaxCtaThreads));
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config " + quoted_input(text) + " cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  return join_fields({{"row_threads", std::to_string(row_threads)}, {"vec", std::to_string(vec)}, {"rows", std::to_string(rows)}});
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (vec != 1 && vec != 2 && vec != 4 && vec != 8) return "vec must be 1, 2, 4 or 8";
  if (spec.hidden % vec != 0) return "vec=" + std::to_string(vec) + " does not divide hidden=" + std::to_string(spec.hidden);
  if (!power_of_two(row_threads)) return "row_threads must be a power of two";
  if (!power_of_two(rows)) return "rows must be a power of two";
  if (cta_threads() > kMaxCtaThreads) return "row_threads*rows exceeds " + std::to_string(kMaxCtaThreads) + " threads per CTA";
  if (cta_threads() < kMinCtaThreads) return "row_threads*rows is below one warp (32 threads)";
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
    return std::to_string(iters(spec)) + " loads per thread (max " + std::to_string(kMaxIters) + "); raise row_threads or vec";
  }
  int vectors = spec.hidden / vec;
  if (row_threads > 1 && row_threads / 2 >= vectors) return "row_threads leaves more than half the row's threads idle";
  return std::nullopt;
}

}  // namespace onecat::rmsnorm
