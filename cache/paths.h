// Where the kernel cache lives: $ONECAT_CACHE_DIR, else $XDG_CACHE_HOME/onecat, else
// ~/.cache/onecat; the file inside is kernels.sqlite.
#pragma once
#include <string>

namespace onecat {

std::string cache_dir();
std::string cache_file();  // cache_dir()/kernels.sqlite
// Creates dir and its missing parents; dirs onecat creates get mode 0700. Throws Error.
void make_private_dir(const std::string& dir);

}  // namespace onecat
