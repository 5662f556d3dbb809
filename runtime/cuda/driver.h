// The CUDA driver API, loaded with dlopen from libcuda.so.1. Only what onecat calls is
// declared, with the driver's own ABI, so no CUDA header is needed to build.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/dynlib.h"

namespace onecat {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

// Values from the driver API (cuda.h), which onecat does not include.
enum CuDeviceAttribute : int {
  kAttrClockRateKHz = 13,
  kAttrMultiprocessorCount = 16,
  kAttrL2CacheBytes = 38,
  kAttrComputeCapabilityMajor = 75,
  kAttrComputeCapabilityMinor = 76,
  kAttrMaxSharedPerBlockOptin = 97,
};
enum CuPointerAttribute : int {
  kPointerDeviceOrdinal = 9,
};
enum CuStreamCaptureMode : int {
  kCaptureModeRelaxed = 2,  // CU_STREAM_CAPTURE_MODE_RELAXED
};
enum CuFunctionAttribute : int {
  kFuncSharedSizeBytes = 1,
  kFuncLocalSizeBytes = 3,
  kFuncNumRegs = 4,
  kFuncMaxDynamicSharedBytes = 8,
};

// cuLaunchKernelEx's configuration, with the driver's layout (cuda.h, CUDA 12.0+): only the
// programmatic stream serialization attribute is used.
inline constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;
struct CuLaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union {
    char bytes[64];
    int value;
  } value = {};
};
struct CuLaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  CuLaunchAttribute* attrs = nullptr;
  unsigned attr_count = 0;
};
static_assert(sizeof(CuLaunchAttribute) == 72 && sizeof(CuLaunchConfig) == 56,
              "cuda.h's CUlaunchAttribute/CUlaunchConfig");

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm = 0;  // compute capability major*10 + minor
  int multiprocessors = 0;
  size_t total_memory = 0;
  int max_shared_per_block_optin = 0;
  int l2_bytes = 0;
};

class Driver {
 public:
  // The loaded driver, or nullptr when libcuda cannot be opened or cuInit fails; never throws.
  static Driver* find();
  // The loaded driver and at least one GPU, or Error saying which is missing.
  static Driver& require_gpu();
  // Why find() returned nullptr or there is no GPU, as one sentence.
  static std::string unavailable_reason();

  int version() const { return version_; }  // e.g. 13000
  std::string version_string() const;
  int device_count() const { return device_count_; }
  DeviceInfo device_info(int ordinal) const;
  const std::string& path() const { return path_; }

  // Throws Error "<function> failed: <ERROR_NAME> (<description>) while <context>".
  void check(CUresult result, const char* function, const std::string& context) const;

  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;  // free, total of the current context's device
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**) = nullptr;
  // nullptr on drivers before CUDA 12.0; launches are then ordinary ones (runtime/jit/module_table.cpp).
  CUresult (*cuLaunchKernelEx)(const CuLaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemAllocHost)(void**, size_t) = nullptr;
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;

 private:
  Driver() = default;
  DynLib lib_;
  std::string path_;
  int version_ = 0;
  int device_count_ = 0;
};

// Sets CUDA_CACHE_DISABLE=1 for this process (before the driver starts, where onecat starts
// it): NVRTC 13 serves repeat compiles from the CUDA compute cache without the ptxas report
// onecat records, and onecat keeps its own cache of every binary.
void disable_cuda_compute_cache();

// Makes device `ordinal`'s primary context current on this thread (the one CUDA's runtime
// and torch use, so pointers are shared with them).
void use_device(int ordinal);

// Device memory owned by one object.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  // A buffer of `bytes` holding a copy of host memory (empty, with no allocation, for 0).
  static DeviceBuffer from_host(const void* data, size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void fill_bytes(unsigned char value);

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// Page-locked host memory (cuMemAllocHost): a copy from it to the GPU is asynchronous, so a
// step's inputs go up in one queued copy. Zeroed when allocated.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  ~PinnedBuffer();
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

// The workspace of kernels that split one output over several CTAs (gemm split-K, attention
// split-KV): fp32 partials and unsigned counters, grown to the largest launch so far. The
// counters are zeroed when allocated and every launch leaves them zero, so a larger launch
// only needs larger buffers. It serves one launch at a time.
class SplitWorkspace {
 public:
  bool fits(int64_t floats, int64_t counters) const {
    return size_t(floats) * 4 <= partial_.bytes() && size_t(counters) * 4 <= counters_.bytes();
  }
  // Grows either buffer that is too small (freeing the old one; counters zeroed on the null stream).
  void reserve(int64_t floats, int64_t counters);
  // The launch arguments: null where the launch needs none.
  CUdeviceptr partial(int64_t floats) const { return floats > 0 ? partial_.ptr() : 0; }
  CUdeviceptr counters(int64_t counters) const { return counters > 0 ? counters_.ptr() : 0; }

 private:
  DeviceBuffer partial_, counters_;
};

}  // namespace onecat
