#include "runtime/cuda/venv.h"

#include <glob.h>

#include <algorithm>
#include <cstdlib>

namespace onecat {

std::string project_venv() {
  if (const char* v = std::getenv("ONECAT_VENV"); v && *v) return v;
#ifdef ONECAT_PROJECT_VENV
  return ONECAT_PROJECT_VENV;
#else
  return "";
#endif
}

std::vector<std::string> venv_files(const std::string& venv, const std::string& pattern) {
  std::vector<std::string> out;
  if (venv.empty()) return out;
  const std::string full = venv + "/lib/python3*/site-packages/" + pattern;
  glob_t g{};
  if (glob(full.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace onecat
