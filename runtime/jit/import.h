// Importing a kernel cache with this onecat's generators and NVRTC as the judge of its rows:
// the store (cache/export.h) checks the file and its cubins, this layer checks that every key,
// spec, config and kernel name is what codegen and the compiler here make, and recompiles for
// import --verify.
#pragma once
#include <string>

#include "cache/export.h"

namespace onecat {

// The checker import_cache below passes: codegen's families and runtime/jit's compiler.
class CompilerImportChecker : public ImportChecker {
 public:
  std::string binary_inconsistency(const KernelBinary& b) const override;
  std::optional<int> generator_version(const std::string& family) const override;
  std::string spec_inconsistency(const TuningRecord& t) const override;
  BinaryVerification verify(const KernelBinary& b) const override;
};

// cache/export.h's import_cache with a CompilerImportChecker: what the CLI and Python call.
ImportReport import_cache(Store& into, const std::string& file, bool verify);

}  // namespace onecat
