#include "codegen/embedding/config.h"

#include "codegen/spec_text.h"
#include "base/error.h"

namespace onecat::embedding {
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
  return join_fields(
      {{"row_threads", std::to_string(row_threads)}, {"vec", std::to_string(vec)}, {"rows", std::to_string(rows)}});
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (vec != 1 && vec != 2 && vec != 4 && vec != 8) return "vec must be 1, 2, 4 or 8";
  if (spec.hidden % vec != 0) {
    return "vec=" + std::to_string(vec) + " does not divide hidden=" + std::to_string(spec.hidden);
  }
  if (!power_of_two(row_threads)) return "row_threads must be a power of two";
  if (!power_of_two(rows)) return "rows must be a power of two";
  if (cta_threads() > kMaxCtaThreads) {
    return "row_threads*rows exceeds " + std::to_string(kMaxCtaThreads) + " threads per CTA";
  }
  if (cta_threads() < kMinCtaThreads) return "row_threads*rows is below one warp (32 threads)";
  if (iters(spec) > kMaxIters) {
    return std::to_string(iters(spec)) + " accesses per thread (max " + std::to_string(kMaxIters) +
           "); raise row_threads or vec";
  }
  if (row_threads > 1 && row_threads / 2 >= spec.hidden / vec) {
    return "row_threads leaves more than half the row's threads idle";
  }
  return std::nullopt;
}

}  // namespace onecat::embedding
