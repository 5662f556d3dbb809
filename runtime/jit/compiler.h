// One kernel: generated source → NVRTC → cubin for a real sm_XX, with its lowered name
// and ptxas report. The binary key hashes everything that shapes the cubin: the source,
// every embedded template it includes, the NVRTC version, the exact options and the arch
// (ARCHITECTURE.md, rule 2), so changing any one of them is a cache miss.
#pragma once
#include <string>
#include <vector>

#include "cache/record.h"
#include "codegen/family.h"
#include "runtime/cuda/nvrtc.h"

namespace onecat {

struct CompileRequest {
  std::string family;
  std::string spec;    // canonical
  std::string config;  // canonical
  Arch arch;
  Emitted emitted;

  // Canonicalises spec and config through the family and emits the source.
  static CompileRequest make(const Family& family, const std::string& spec, const std::string& config, Arch arch);
};

// The exact NVRTC option list for an arch (no paths, so keys travel between machines).
std::vector<std::string> nvrtc_options(Arch arch);

std::string binary_key(const CompileRequest& request, const std::string& nvrtc_version,
                       const std::vector<std::string>& options);

// Compiles without looking at any cache. Throws Error with NVRTC's log on a compile error.
KernelBinary compile_kernel(const CompileRequest& request, const NvrtcLib& nvrtc);

// The PTX of a request (for reading which instructions a kernel uses).
std::string compile_to_ptx(const CompileRequest& request, const NvrtcLib& nvrtc);

}  // namespace onecat
