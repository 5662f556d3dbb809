#include "codegen/common/row_config.h"

namespace onecat::row_config {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Fields parse_fields(std::string_view text) {
  FieldReader r(text, "config " + quoted_input(text));
  Fields f;
  f.row_threads = static_cast<int>(r.integer("row_threads", 1, kMaxCtaThreads));
  f.vec = static_cast<int>(r.integer("vec", 1, 8));
  f.rows = static_cast<int>(r.integer("rows", 1, kMaxCtaThreads));
  r.finish();
  return f;
}

std::string to_string(int row_threads, int vec, int rows) {
  return join_fields(
      {{"row_threads", std::to_string(row_threads)}, {"vec", std::to_string(vec)}, {"rows", std::to_string(rows)}});
}

std::optional<std::string> common_invalid_reason(int row_threads, int vec, int rows, int hidden) {
  if (vec != 1 && vec != 2 && vec != 4 && vec != 8) return "vec must be 1, 2, 4 or 8";
  if (hidden % vec != 0) return "vec=" + std::to_string(vec) + " does not divide hidden=" + std::to_string(hidden);
  if (!power_of_two(row_threads)) return "row_threads must be a power of two";
  if (!power_of_two(rows)) return "rows must be a power of two";
  if (row_threads * rows > kMaxCtaThreads) {
    return "row_threads*rows exceeds " + std::to_string(kMaxCtaThreads) + " threads per CTA";
  }
  if (row_threads * rows < kMinCtaThreads) return "row_threads*rows is below one warp (32 threads)";
  return std::nullopt;
}

std::optional<std::string> idle_reason(int row_threads, int vec, int hidden) {
  if (row_threads > 1 && row_threads / 2 >= hidden / vec)
    return "row_threads leaves more than half the row's threads idle";
  return std::nullopt;
}

int widest_vec(int hidden) {
  for (int v : {8, 4, 2}) {
    if (hidden % v == 0) return v;
  }
  return 1;
}

}  // namespace onecat::row_config
