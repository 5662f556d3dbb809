#include "runtime/jit/debug.h"

#include <cstdio>
#include <cstdlib>

namespace onecat {

bool debug_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ONECAT_DEBUG");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void debug_log(const std::string& line) {
  if (debug_enabled()) std::fprintf(stderr, "[onecat] %s\n", line.c_str());
}

}  // namespace onecat
