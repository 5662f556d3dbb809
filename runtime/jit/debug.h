// ONECAT_DEBUG=1 prints compile, cache and launch decisions to stderr (like tinygrad's DEBUG).
#pragma once
#include <string>

namespace onecat {

bool debug_enabled();
void debug_log(const std::string& line);

}  // namespace onecat
