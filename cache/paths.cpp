#include "cache/paths.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace onecat {

std::string cache_dir() {
  if (const char* d = std::getenv("ONECAT_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/onecat";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/onecat";
  throw Error("cannot place the kernel cache: set ONECAT_CACHE_DIR (or HOME)");
}

std::string cache_file() { return cache_dir() + "/kernels.sqlite"; }

void make_private_dir(const std::string& dir) {
  if (dir.empty()) return;
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw Error("cache directory " + dir + " exists but is not a directory");
    return;
  }
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_private_dir(dir.substr(0, slash));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create cache directory " + dir + ": " + std::strerror(errno));
  }
}

}  // namespace onecat
