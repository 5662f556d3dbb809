#include "runtime/jit/ptxas_report.h"

#include <regex>
#include <sstream>

#include "runtime/cuda/error.h"

namespace onecat {
namespace {

int number_before(const std::string& line, const std::string& unit) {
  std::smatch m;
  std::regex re("(\\d+) " + unit);
  return std::regex_search(line, m, re) ? std::stoi(m[1]) : 0;
}

}  // namespace

ResourceUsage parse_ptxas_report(const std::string& log, const std::string& lowered_name) {
  // Report shape (NVRTC 12.x and 13.x):
  //   ptxas info    : Compiling entry function '_Z…' for 'sm_70'
  //   ptxas info    : Function properties for _Z…
  //   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 37 registers, used 1 barriers, 16 bytes smem, 368 bytes cmem[0]
  std::istringstream in(log);
  std::string line;
  std::string current;
  bool found = false;
  ResourceUsage usage;
  while (std::getline(in, line)) {
    static const std::regex entry_re("Compiling entry function '([^']+)'");
    static const std::regex props_re("Function properties for (\\S+)");
    std::smatch m;
    if (std::regex_search(line, m, entry_re) || std::regex_search(line, m, props_re)) {
      current = m[1];
      continue;
    }
    bool ours = lowered_name.empty() || current == lowered_name;
    if (!ours) continue;
    if (line.find("bytes stack frame") != std::string::npos) {
      usage.stack_bytes = number_before(line, "bytes stack frame");
      usage.spill_store_bytes = number_before(line, "bytes spill stores");
      usage.spill_load_bytes = number_before(line, "bytes spill loads");
    } else if (line.find("Used ") != std::string::npos && line.find("registers") != std::string::npos) {
      usage.registers = number_before(line, "registers");
      usage.barriers = number_before(line, "barriers");
      usage.shared_bytes = number_before(line, "bytes smem");
      found = true;
    }
  }
  if (!found) {
    throw Error("NVRTC's log has no ptxas resource report for " + (lowered_name.empty() ? "the kernel" : lowered_name) +
                " (was --ptxas-options=-v passed?)");
  }
  return usage;
}

}  // namespace onecat
