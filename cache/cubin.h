// What a cubin says about itself: the SM it was built for and its function symbols, read
// from its ELF header and symbol table with every offset bounds-checked (an imported cache
// file may be hostile). Used to tell whether a row's cubin really is the kernel it claims.
#pragma once
#include <string>
#include <vector>

namespace onecat {

struct CubinFacts {
  std::vector<int> sm_candidates;  // the e_flags bytes that can hold the SM (the ELF ABI moved it)
  std::vector<std::string> functions;
  bool built_for(int sm) const;
  bool defines(const std::string& symbol) const;
};

// Throws Error with a short reason for anything that is not a 64-bit little-endian CUDA ELF
// image with a readable symbol table.
CubinFacts read_cubin(const std::string& image);

}  // namespace onecat
