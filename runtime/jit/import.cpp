#include "runtime/jit/import.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "base/arch.h"
#include "base/error.h"
#include "codegen/family.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/compiler.h"

namespace onecat {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string demangled(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && text ? std::string(text.get()) : std::string();
}

}  // namespace

// The key is recomputed from the row's spec, config, arch, NVRTC version and options, and the
// kernel's name must be the one that spec and config emit.
std::string CompilerImportChecker::binary_inconsistency(const KernelBinary& b) const {
  try {
    const Arch arch = Arch::parse(b.arch);
    const CompileRequest req = CompileRequest::make(family_of(b.spec), b.spec, b.config, arch);
    if (req.spec != b.spec || req.config != b.config) return "its spec or config is not in canonical form";
    std::vector<std::string> options;
    for (size_t at = 0; at <= b.options.size();) {
      const size_t space = std::min(b.options.find(' ', at), b.options.size());
      options.push_back(b.options.substr(at, space - at));
      at = space + 1;
    }
    if (binary_key(req, b.nvrtc_version, options) != b.key)
      return "its key does not match its spec, config and compiler";
    if (demangled(b.lowered_name).rfind("void " + req.emitted.kernel_expression + "(", 0) != 0) {
      return "its kernel " + b.lowered_name.substr(0, 120) + " is not the one its spec and config emit";
    }
  } catch (const Error& e) {
    return first_line(e.what()).substr(0, 300);
  }
  return "";
}

std::optional<int> CompilerImportChecker::generator_version(const std::string& family) const {
  if (const Family* f = find_family(family)) return f->generator_version();
  return std::nullopt;
}

std::string CompilerImportChecker::spec_inconsistency(const TuningRecord& t) const {
  try {
    const Family& family = family_of(t.spec);
    if (&family != find_family(t.family)) return "its spec is not of family " + t.family;
    if (family.canonical_spec(t.spec) != t.spec) return "its spec is not in canonical form";
    for (const std::string* config : {&t.config, &t.default_config}) {
      if (family.canonical_config(t.spec, *config) != *config)
        return "config " + config->substr(0, 100) + " is not canonical";
    }
  } catch (const Error& e) {
    return first_line(e.what()).substr(0, 300);
  }
  return "";
}

BinaryVerification CompilerImportChecker::verify(const KernelBinary& b) const {
  BinaryVerification v;
  v.key = b.key;
  v.spec = b.spec;
  v.config = b.config;
  v.arch = b.arch;
  try {
    const Arch arch = Arch::parse(b.arch);
    const NvrtcLib& nvrtc = NvrtcRegistry::get().for_arch(arch);
    if (nvrtc.version() != b.nvrtc_version) {
      v.detail = "cannot verify: built with NVRTC " + b.nvrtc_version + ", this machine has " + nvrtc.version();
      return v;
    }
    const CompileRequest req = CompileRequest::make(family_of(b.spec), b.spec, b.config, arch);
    const std::string key = binary_key(req, nvrtc.version(), nvrtc_options(arch));
    if (key != b.key) {
      v.detail = "its key differs from the one rebuilt here (" + key.substr(0, 16) +
                 "…): other templates, options or generator";
      return v;
    }
    const KernelBinary fresh = compile_kernel(req, nvrtc);
    if (fresh.cubin != b.cubin) {
      size_t at = 0;
      while (at < fresh.cubin.size() && at < b.cubin.size() && fresh.cubin[at] == b.cubin[at]) ++at;
      v.detail = "the recompiled cubin differs (" + std::to_string(fresh.cubin.size()) + " bytes here, " +
                 std::to_string(b.cubin.size()) + " in the file, first difference at byte " + std::to_string(at) + ")";
      return v;
    }
    v.ok = true;
  } catch (const Error& e) {
    v.detail = "cannot verify: " + first_line(e.what());
  }
  return v;
}

ImportReport import_cache(Store& into, const std::string& file, bool verify) {
  return import_cache(into, file, verify, CompilerImportChecker{});
}

}  // namespace onecat
