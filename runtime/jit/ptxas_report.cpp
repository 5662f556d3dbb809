#include "runtime/jit/ptxas_report.h"

#include <cctype>
#include <sstream>

#include "base/error.h"

namespace onecat {
namespace {

// The number written just before " unit" in line ("37 registers"), 0 where there is none.
// Plain string search, no std::regex (see base/arch.cpp).
int number_before(const std::string& line, const std::string& unit) {
  const std::string key = " " + unit;
  for (size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + 1)) {
    size_t begin = at;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
    if (begin < at) return std::stoi(line.substr(begin, at - begin));
  }
  return 0;
}

// The function a report line names: 'X' after "Compiling entry function ", or the word after
// "Function properties for ". Empty for other lines.
std::string function_named(const std::string& line) {
  static const std::string entry = "Compiling entry function '", props = "Function properties for ";
  if (size_t at = line.find(entry); at != std::string::npos) {
    const size_t begin = at + entry.size(), end = line.find('\'', begin);
    if (end != std::string::npos && end > begin) return line.substr(begin, end - begin);
  }
  if (size_t at = line.find(props); at != std::string::npos) {
    size_t end = at + props.size();
    while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
    return line.substr(at + props.size(), end - at - props.size());
  }
  return "";
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
    if (std::string name = function_named(line); !name.empty()) {
      current = name;
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
