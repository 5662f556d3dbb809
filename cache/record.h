// What the store keeps for one compiled kernel: GPU code and the facts about it, never
// host code (ARCHITECTURE.md, rule 3).
#pragma once
#include <string>

namespace onecat {

// From ptxas's report (-Xptxas -v) in NVRTC's log; -1 where the report did not say.
struct ResourceUsage {
  int registers = -1;
  int shared_bytes = 0;  // static shared memory
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_bytes = 0;
  int barriers = 0;
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

struct KernelBinary {
  std::string key;  // sha256 hex of everything that shapes the cubin (see jit/compiler.h)
  std::string family;
  std::string spec;    // canonical
  std::string config;  // canonical
  std::string arch;    // "sm_70"
  std::string nvrtc_version;
  std::string options;  // the exact NVRTC option list, space separated
  std::string cubin;    // ELF bytes
  std::string lowered_name;
  ResourceUsage usage;
  double compile_ms = 0;
};

}  // namespace onecat
