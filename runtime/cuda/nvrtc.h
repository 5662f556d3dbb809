// NVRTC libraries found on this machine, each loaded with dlopen. Discovery order:
//   1. $ONECAT_NVRTC (a path to libnvrtc.so.*): used alone when set;
//   2. the project's virtual environment ($ONECAT_VENV, else the one scripts/setup made),
//      where the pinned CUDA 12.8 NVRTC lives (the newest that still targets sm_70);
//   3. the system (the loader's search path, then /usr/local/cuda).
// A compile for an arch uses the first library, in that order, that can target it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/arch.h"
#include "runtime/cuda/dynlib.h"

namespace onecat {

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

class NvrtcLib {
 public:
  // Opens one library; throws Error when it is not a usable NVRTC.
  static std::unique_ptr<NvrtcLib> load(const std::string& path);

  const std::string& path() const { return path_; }
  int major() const { return major_; }
  int minor() const { return minor_; }
  std::string version() const { return std::to_string(major_) + "." + std::to_string(minor_); }
  const std::vector<int>& archs() const { return archs_; }  // e.g. {50, 52, …, 90, 100, 120}
  bool supports(Arch arch) const;
  std::string archs_text() const;  // "sm_50 … sm_120"

  // Throws Error "<function> failed: <NVRTC_ERROR_…> while <context>".
  void check(nvrtcResult result, const char* function, const std::string& context) const;

  const char* (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram, const char*) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram, const char*, const char**) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*) = nullptr;

 private:
  NvrtcLib() = default;
  DynLib lib_;
  std::string path_;
  int major_ = 0;
  int minor_ = 0;
  std::vector<int> archs_;
};

class NvrtcRegistry {
 public:
  // Discovers once per process (thread-safe).
  static const NvrtcRegistry& get();
  // A fresh discovery, for tests that change the environment.
  static NvrtcRegistry discover();

  const std::vector<std::unique_ptr<NvrtcLib>>& libraries() const { return libs_; }
  // Every place looked at, with why it was not used ("" when it was).
  const std::vector<std::pair<std::string, std::string>>& searched() const { return searched_; }
  // The library to compile for `arch`, or Error saying what to install.
  const NvrtcLib& for_arch(Arch arch) const;

 private:
  std::vector<std::unique_ptr<NvrtcLib>> libs_;
  std::vector<std::pair<std::string, std::string>> searched_;
  bool from_env_ = false;
};

// The pinned PyPI package that provides an NVRTC able to target sm_70.
inline constexpr const char* kPinnedNvrtcPackage = "nvidia-cuda-nvrtc-cu12==12.8.93";
inline constexpr const char* kPinnedNvrtcVersion = "12.8";

}  // namespace onecat
