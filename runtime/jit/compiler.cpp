#include "runtime/jit/compiler.h"

#include <chrono>
#include <cstdlib>
#include <memory>

#include "base/error.h"
#include "base/sha256.h"
#include "codegen/templates.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/debug.h"
#include "runtime/jit/ptxas_report.h"

namespace onecat {
namespace {

// Frees the program on every path out of a compile.
struct Program {
  explicit Program(const NvrtcLib& lib) : nvrtc(lib) {}
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  const NvrtcLib& nvrtc;
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog) nvrtc.nvrtcDestroyProgram(&prog);
  }
};

std::string joined(const std::vector<std::string>& options) {
  std::string out;
  for (const auto& o : options) out += (out.empty() ? "" : " ") + o;
  return out;
}

std::string program_log(const NvrtcLib& nvrtc, nvrtcProgram prog) {
  size_t size = 0;
  nvrtc.nvrtcGetProgramLogSize(prog, &size);
  std::string log(size, '\0');
  if (size > 0) nvrtc.nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Creates and compiles the program; returns its log. Throws with the log on failure.
std::string build(Program& p, const CompileRequest& req, const std::vector<std::string>& options) {
  const NvrtcLib& nvrtc = p.nvrtc;
  std::vector<EmbeddedTemplate> headers = templates_included_by(req.emitted.source);
  std::vector<std::string> header_text, header_name;
  for (const auto& h : headers) header_text.emplace_back(h.text), header_name.emplace_back(h.name);
  std::vector<const char*> texts, names;
  for (size_t i = 0; i < headers.size(); ++i)
    texts.push_back(header_text[i].c_str()), names.push_back(header_name[i].c_str());
  const std::string what = req.spec + " [" + req.config + "] for " + req.arch.name();
  const std::string& source = req.emitted.source;
  nvrtc.check(nvrtc.nvrtcCreateProgram(&p.prog, source.c_str(), (req.family + ".cu").c_str(), int(texts.size()),
                                       texts.data(), names.data()),
              "nvrtcCreateProgram", "creating " + what);
  nvrtc.check(nvrtc.nvrtcAddNameExpression(p.prog, req.emitted.kernel_expression.c_str()), "nvrtcAddNameExpression",
              "naming " + req.emitted.kernel_expression);
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  int rc = nvrtc.nvrtcCompileProgram(p.prog, int(opts.size()), opts.data());
  std::string log = program_log(nvrtc, p.prog);
  if (rc != 0) {
    throw Error("NVRTC " + nvrtc.version() + " could not compile " + what + ": " + nvrtc.nvrtcGetErrorString(rc) +
                "\n" + log);
  }
  return log;
}

}  // namespace

CompileRequest CompileRequest::make(const Family& family, const std::string& spec, const std::string& config,
                                    Arch arch) {
  CompileRequest r;
  r.family = std::string(family.name());
  r.spec = family.canonical_spec(spec);
  r.config = family.canonical_config(r.spec, config);
  r.arch = arch;
  r.emitted = family.emit(r.spec, r.config, arch);
  return r;
}

std::vector<std::string> nvrtc_options(Arch arch) {
  return {"--gpu-architecture=" + arch.name(), "-std=c++17", "--ptxas-options=-v"};
}

std::string binary_key(const CompileRequest& req, const std::string& nvrtc_version,
                       const std::vector<std::string>& options) {
  Sha256 h;
  h.field("onecat-binary-key-v1").field(req.emitted.source).field(req.emitted.kernel_expression);
  for (const auto& t : templates_included_by(req.emitted.source)) h.field(t.name).field(t.text);
  h.field(nvrtc_version);
  for (const auto& o : options) h.field(o);
  h.field(req.arch.name());
  return to_hex(h.finish());
}

KernelBinary compile_kernel(const CompileRequest& req, const NvrtcLib& nvrtc) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> options = nvrtc_options(req.arch);
  disable_cuda_compute_cache();
  // NVRTC 13 (its docs say 12.9+) keeps compiled programs in the driver's compute cache (~/.nv/ComputeCache) and
  // on a hit skips ptxas and leaves the log without its resource report (seen on the H200 device
  // with NVRTC 13.0, 2026-11-29). CUDA_CACHE_DISABLE only helps when set before the driver
  // starts, which a host such as torch does first, and that cache keys the PTX, so no change to
  // the source's text misses it (a salted retry hit it again, 2026-12-02). Its own option
  // --no-cache does. It changes no output, so it stays out of the binary key: keys made before
  // it, and by NVRTC 12.8 which lacks it, stay valid. Passed from 13 on, where the option was
  // seen in the library (12.9 untested here: a cache hit there is the error below).
  std::vector<std::string> compile_options = options;
  if (nvrtc.major() >= 13) compile_options.push_back("--no-cache");
  auto p = std::make_unique<Program>(nvrtc);
  std::string log = build(*p, req, compile_options);
  if (log.find("Used ") == std::string::npos) {
    throw Error("NVRTC " + nvrtc.version() + " compiled " + req.spec + " [" + req.config +
                "] without its ptxas resource report (did its compiled-program cache answer?)");
  }

  KernelBinary b;
  const char* lowered = nullptr;
  nvrtc.check(nvrtc.nvrtcGetLoweredName(p->prog, req.emitted.kernel_expression.c_str(), &lowered),
              "nvrtcGetLoweredName", "lowering " + req.emitted.kernel_expression);
  b.lowered_name = lowered;
  size_t size = 0;
  nvrtc.check(nvrtc.nvrtcGetCUBINSize(p->prog, &size), "nvrtcGetCUBINSize", "reading the cubin of " + req.spec);
  b.cubin.resize(size);
  nvrtc.check(nvrtc.nvrtcGetCUBIN(p->prog, b.cubin.data()), "nvrtcGetCUBIN", "reading the cubin of " + req.spec);
  debug_log("NVRTC " + nvrtc.version() + " log for " + req.spec + " [" + req.config + "] " + req.arch.name() + ":\n" +
            log);
  b.usage = parse_ptxas_report(log, b.lowered_name);
  b.key = binary_key(req, nvrtc.version(), options);
  b.family = req.family;
  b.spec = req.spec;
  b.config = req.config;
  b.arch = req.arch.name();
  b.nvrtc_version = nvrtc.version();
  b.options = joined(options);
  b.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return b;
}

std::string compile_to_ptx(const CompileRequest& req, const NvrtcLib& nvrtc) {
  // PTX for the virtual arch of the same generation: what ptxas would get for the cubin.
  std::vector<std::string> options = nvrtc_options(req.arch);
  options[0] = "--gpu-architecture=compute_" + std::to_string(req.arch.sm);
  std::erase(options, std::string("--ptxas-options=-v"));  // PTX output runs no ptxas
  Program p(nvrtc);
  build(p, req, options);
  size_t size = 0;
  nvrtc.check(nvrtc.nvrtcGetPTXSize(p.prog, &size), "nvrtcGetPTXSize", "reading the PTX of " + req.spec);
  std::string ptx(size, '\0');
  nvrtc.check(nvrtc.nvrtcGetPTX(p.prog, ptx.data()), "nvrtcGetPTX", "reading the PTX of " + req.spec);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace onecat
