// A byte count as people read it in messages ("8.0 MiB"): the GPU driver's allocations and copies,
// the server's body limits.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

namespace onecat {

inline std::string human_bytes(size_t bytes) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, unit[u]);
  return buf;
}

}  // namespace onecat
