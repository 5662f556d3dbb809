#include "runtime/cuda/nvrtc.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "base/error.h"
#include "runtime/cuda/venv.h"

namespace onecat {
namespace {

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// Where the NVIDIA PyPI wheels put NVRTC inside a virtual environment.
std::vector<std::string> venv_candidates(const std::string& venv) {
  std::vector<std::string> out;
  if (venv.empty()) return out;
  for (const char* sub : {"nvidia/cuda_nvrtc/lib/libnvrtc.so.*[0-9]", "nvidia/cu13/lib/libnvrtc.so.*[0-9]"}) {
    for (auto& p : venv_files(venv, sub)) {
      if (p.find("builtins") == std::string::npos && p.find(".alt.") == std::string::npos) out.push_back(p);
    }
  }
  return out;
}

const std::vector<std::string> kSystemCandidates = {
    "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so"};

}  // namespace

std::unique_ptr<NvrtcLib> NvrtcLib::load(const std::string& path) {
  std::unique_ptr<NvrtcLib> n(new NvrtcLib());
  n->lib_ = DynLib::open(path);
  if (!n->lib_) throw Error(n->lib_.error());
  const DynLib& l = n->lib_;
  l.bind(n->nvrtcGetErrorString, "nvrtcGetErrorString");
  l.bind(n->nvrtcVersion, "nvrtcVersion");
  l.bind(n->nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  l.bind(n->nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs");
  l.bind(n->nvrtcCreateProgram, "nvrtcCreateProgram");
  l.bind(n->nvrtcDestroyProgram, "nvrtcDestroyProgram");
  l.bind(n->nvrtcAddNameExpression, "nvrtcAddNameExpression");
  l.bind(n->nvrtcCompileProgram, "nvrtcCompileProgram");
  l.bind(n->nvrtcGetLoweredName, "nvrtcGetLoweredName");
  l.bind(n->nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  l.bind(n->nvrtcGetProgramLog, "nvrtcGetProgramLog");
  l.bind(n->nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  l.bind(n->nvrtcGetCUBIN, "nvrtcGetCUBIN");
  l.bind(n->nvrtcGetPTXSize, "nvrtcGetPTXSize");
  l.bind(n->nvrtcGetPTX, "nvrtcGetPTX");
  n->path_ = real_path(l.path());
  n->check(n->nvrtcVersion(&n->major_, &n->minor_), "nvrtcVersion", "reading the version of " + n->path_);
  int count = 0;
  n->check(n->nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs", "listing archs of " + n->path_);
  n->archs_.resize(count);
  if (count > 0) n->check(n->nvrtcGetSupportedArchs(n->archs_.data()), "nvrtcGetSupportedArchs", "listing archs of " + n->path_);
  return n;
}

bool NvrtcLib::supports(Arch arch) const {
  return std::find(archs_.begin(), archs_.end(), arch.sm) != archs_.end();
}

std::string NvrtcLib::archs_text() const {
  std::string out;
  for (int a : archs_) out += (out.empty() ? "sm_" : " sm_") + std::to_string(a);
  return out;
}

void NvrtcLib::check(nvrtcResult result, const char* function, const std::string& context) const {
  if (result == 0) return;
  throw Error(std::string(function) + " failed: " + nvrtcGetErrorString(result) + " while " + context);
}

NvrtcRegistry NvrtcRegistry::discover() {
  NvrtcRegistry reg;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ONECAT_NVRTC"); env && *env) {
    reg.from_env_ = true;
    candidates.push_back(env);
  } else {
    candidates = venv_candidates(project_venv());
    candidates.insert(candidates.end(), kSystemCandidates.begin(), kSystemCandidates.end());
  }
  // One NVRTC per major version: a second copy of the same major (another file, e.g. the
  // one a host process such as torch already loaded) would never be chosen by for_arch and
  // would share the first one's libnvrtc-builtins by soname.
  auto loaded_major = [&](int major) -> const NvrtcLib* {
    for (const auto& lib : reg.libs_) {
      if (lib->major() == major) return lib.get();
    }
    return nullptr;
  };
  std::set<std::string> loaded;
  for (const auto& c : candidates) {
    const size_t so = c.rfind("libnvrtc.so.");
    if (so != std::string::npos && c.find('/', so) == std::string::npos) {
      const int major = std::atoi(c.c_str() + so + std::strlen("libnvrtc.so."));
      if (const NvrtcLib* have = major > 0 ? loaded_major(major) : nullptr) {
        reg.searched_.emplace_back(c, "skipped: NVRTC " + have->version() + " is already loaded from " + have->path());
        continue;
      }
    }
    try {
      auto lib = NvrtcLib::load(c);
      if (!loaded.insert(lib->path()).second) continue;  // same file under another name
      if (const NvrtcLib* have = loaded_major(lib->major())) {
        reg.searched_.emplace_back(c, "skipped: NVRTC " + have->version() + " is already loaded from " + have->path());
        continue;
      }
      reg.searched_.emplace_back(c, "");
      reg.libs_.push_back(std::move(lib));
    } catch (const Error& e) {
      reg.searched_.emplace_back(c, e.what());
    }
  }
  return reg;
}

const NvrtcRegistry& NvrtcRegistry::get() {
  static const NvrtcRegistry reg = discover();
  return reg;
}

const NvrtcLib& NvrtcRegistry::for_arch(Arch arch) const {
  for (const auto& lib : libs_) {
    if (lib->supports(arch)) return *lib;
  }
  const std::string install = std::string("install CUDA 12.8's NVRTC (scripts/setup does: pip install ") +
                              kPinnedNvrtcPackage + ") or point ONECAT_NVRTC at a libnvrtc.so that can";
  if (libs_.empty()) {
    std::string where;
    for (const auto& [path, why] : searched_) where += (where.empty() ? "" : ", ") + path;
    if (from_env_) {
      throw Error("ONECAT_NVRTC=" + searched_.front().first + " cannot be loaded (" + searched_.front().second +
                  "); set it to the path of a libnvrtc.so, or unset it to search the usual places");
    }
    throw Error("no NVRTC found (looked for " + where + "); " + install + " target " + arch.name());
  }
  std::string have;
  int newest = 0;
  bool pinned_here = false;
  for (const auto& lib : libs_) {
    have += (have.empty() ? "" : "; ") + ("NVRTC " + lib->version() + " (" + lib->path() + ", " + lib->archs_text() + ")");
    for (int a : lib->archs()) newest = std::max(newest, a);
    pinned_here = pinned_here || lib->version() == kPinnedNvrtcVersion;
  }
  // Installing the pinned NVRTC helps only an arch it targets that the ones here do not.
  if (arch.sm > newest) {
    throw Error(have + " cannot target " + arch.name() + ", which is newer than every arch they know; an NVRTC from a " +
                "CUDA that knows " + arch.name() + " can: point ONECAT_NVRTC at its libnvrtc.so");
  }
  if (pinned_here) {
    throw Error(have + " cannot target " + arch.name() + "; point ONECAT_NVRTC at a libnvrtc.so that can");
  }
  throw Error(have + " cannot target " + arch.name() + "; " + install);
}

}  // namespace onecat
