#include "runtime/cuda/driver.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "base/bytes.h"
#include "base/error.h"

namespace onecat {
namespace {

constexpr CUresult kSuccess = 0;
constexpr const char* kDriverLibrary = "libcuda.so.1";

std::string& unavailable_message() {
  static std::string message;
  return message;
}

}  // namespace

void disable_cuda_compute_cache() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("CUDA_CACHE_DISABLE", "1", 1); });
}

Driver* Driver::find() {
  static Driver* driver = [] {
    disable_cuda_compute_cache();
    auto* d = new Driver();
    d->lib_ = DynLib::open(kDriverLibrary);
    if (!d->lib_) {
      unavailable_message() = "no CUDA driver found (" + std::string(kDriverLibrary) +
                              " cannot be loaded: " + d->lib_.error() + "); install the NVIDIA driver to run kernels";
      delete d;
      return static_cast<Driver*>(nullptr);
    }
    try {
      const DynLib& l = d->lib_;
      l.bind(d->cuInit, "cuInit");
      l.bind(d->cuDriverGetVersion, "cuDriverGetVersion");
      l.bind(d->cuGetErrorName, "cuGetErrorName");
      l.bind(d->cuGetErrorString, "cuGetErrorString");
      l.bind(d->cuDeviceGetCount, "cuDeviceGetCount");
      l.bind(d->cuDeviceGet, "cuDeviceGet");
      l.bind(d->cuDeviceGetName, "cuDeviceGetName");
      l.bind(d->cuDeviceGetAttribute, "cuDeviceGetAttribute");
      l.bind(d->cuDeviceTotalMem, "cuDeviceTotalMem_v2");
      l.bind(d->cuMemGetInfo, "cuMemGetInfo_v2");
      l.bind(d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
      l.bind(d->cuCtxSetCurrent, "cuCtxSetCurrent");
      l.bind(d->cuCtxGetCurrent, "cuCtxGetCurrent");
      l.bind(d->cuCtxSynchronize, "cuCtxSynchronize");
      l.bind(d->cuModuleLoadData, "cuModuleLoadData");
      l.bind(d->cuModuleUnload, "cuModuleUnload");
      l.bind(d->cuModuleGetFunction, "cuModuleGetFunction");
      l.bind(d->cuFuncGetAttribute, "cuFuncGetAttribute");
      l.bind(d->cuFuncSetAttribute, "cuFuncSetAttribute");
      l.bind(d->cuLaunchKernel, "cuLaunchKernel");
      l.bind(d->cuMemAlloc, "cuMemAlloc_v2");
      l.bind(d->cuMemFree, "cuMemFree_v2");
      l.bind(d->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
      l.bind(d->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
      l.bind(d->cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
      l.bind(d->cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
      l.bind(d->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
      l.bind(d->cuMemAllocHost, "cuMemAllocHost_v2");
      l.bind(d->cuMemFreeHost, "cuMemFreeHost");
      l.bind(d->cuMemsetD8, "cuMemsetD8_v2");
      l.bind(d->cuPointerGetAttribute, "cuPointerGetAttribute");
      l.bind(d->cuStreamSynchronize, "cuStreamSynchronize");
      l.bind(d->cuEventCreate, "cuEventCreate");
      l.bind(d->cuEventRecord, "cuEventRecord");
      l.bind(d->cuEventSynchronize, "cuEventSynchronize");
      l.bind(d->cuEventElapsedTime, "cuEventElapsedTime");
      l.bind(d->cuEventDestroy, "cuEventDestroy_v2");
      l.bind(d->cuStreamCreate, "cuStreamCreate");
      l.bind(d->cuStreamDestroy, "cuStreamDestroy_v2");
      l.bind(d->cuStreamBeginCapture, "cuStreamBeginCapture_v2");
      l.bind(d->cuStreamEndCapture, "cuStreamEndCapture");
      l.bind(d->cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
      l.bind(d->cuGraphLaunch, "cuGraphLaunch");
      l.bind(d->cuGraphExecDestroy, "cuGraphExecDestroy");
      l.bind(d->cuGraphDestroy, "cuGraphDestroy");
      d->cuLaunchKernelEx = reinterpret_cast<decltype(d->cuLaunchKernelEx)>(l.symbol("cuLaunchKernelEx"));
    } catch (const Error& e) {
      unavailable_message() = e.what();
      delete d;
      return static_cast<Driver*>(nullptr);
    }
    d->path_ = d->lib_.path();
    d->cuDriverGetVersion(&d->version_);
    CUresult r = d->cuInit(0);
    if (r == kSuccess) d->cuDeviceGetCount(&d->device_count_);
    if (r != kSuccess || d->device_count_ == 0) {
      const char* name = "";
      d->cuGetErrorName(r, &name);
      unavailable_message() = "CUDA driver " + d->version_string() + " found but no GPU is usable (cuInit: " +
                              std::string(r == kSuccess ? "0 devices" : name) + ")";
    }
    return d;
  }();
  return driver;
}

Driver& Driver::require_gpu() {
  Driver* d = find();
  if (!d || d->device_count_ == 0) throw Error(unavailable_reason() + "; this command needs an NVIDIA GPU");
  return *d;
}

std::string Driver::unavailable_reason() {
  Driver* d = find();
  if (d && d->device_count_ > 0) return "";
  return unavailable_message();
}

std::string Driver::version_string() const {
  return std::to_string(version_ / 1000) + "." + std::to_string((version_ % 1000) / 10);
}

void Driver::check(CUresult result, const char* function, const std::string& context) const {
  if (result == kSuccess) return;
  const char* name = "CUDA_ERROR_UNKNOWN";
  const char* text = "unknown error";
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  throw Error(std::string(function) + " failed: " + name + " (" + text + ") while " + context);
}

DeviceInfo Driver::device_info(int ordinal) const {
  DeviceInfo info;
  info.ordinal = ordinal;
  CUdevice dev = 0;
  check(cuDeviceGet(&dev, ordinal), "cuDeviceGet", "opening GPU " + std::to_string(ordinal));
  char name[256] = {};
  check(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName", "reading the GPU name");
  info.name = name;
  auto attr = [&](int a) {
    int v = 0;
    check(cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute", "reading attribute " + std::to_string(a));
    return v;
  };
  info.sm = attr(kAttrComputeCapabilityMajor) * 10 + attr(kAttrComputeCapabilityMinor);
  info.multiprocessors = attr(kAttrMultiprocessorCount);
  info.max_shared_per_block_optin = attr(kAttrMaxSharedPerBlockOptin);
  info.l2_bytes = attr(kAttrL2CacheBytes);
  check(cuDeviceTotalMem(&info.total_memory, dev), "cuDeviceTotalMem", "reading the GPU memory size");
  return info;
}

void use_device(int ordinal) {
  Driver& d = Driver::require_gpu();
  static std::mutex mutex;
  static std::vector<CUcontext> contexts;
  CUcontext ctx = nullptr;
  {
    std::lock_guard lock(mutex);
    if (contexts.size() <= size_t(ordinal)) contexts.resize(ordinal + 1, nullptr);
    if (!contexts[ordinal]) {
      CUdevice dev = 0;
      d.check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet", "opening GPU " + std::to_string(ordinal));
      d.check(d.cuDevicePrimaryCtxRetain(&contexts[ordinal], dev), "cuDevicePrimaryCtxRetain",
              "creating the context of GPU " + std::to_string(ordinal));
    }
    ctx = contexts[ordinal];
  }
  d.check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", "selecting GPU " + std::to_string(ordinal));
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  Driver& d = Driver::require_gpu();
  d.check(d.cuMemAlloc(&ptr_, bytes == 0 ? 1 : bytes), "cuMemAlloc",
          "allocating " + human_bytes(bytes) + " on the GPU");
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) Driver::find()->cuMemFree(ptr_);
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) Driver::find()->cuMemFree(ptr_);
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  Driver& d = *Driver::find();
  d.check(d.cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD", "copying " + human_bytes(bytes) + " to the GPU");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  Driver& d = *Driver::find();
  d.check(d.cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH", "copying " + human_bytes(bytes) + " from the GPU");
}

DeviceBuffer DeviceBuffer::from_host(const void* data, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes) b.upload(data, bytes);
  return b;
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  Driver& d = *Driver::find();
  d.check(d.cuMemsetD8(ptr_, value, bytes_), "cuMemsetD8", "filling " + human_bytes(bytes_) + " on the GPU");
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  Driver& d = Driver::require_gpu();
  void* p = nullptr;
  d.check(d.cuMemAllocHost(&p, bytes == 0 ? 1 : bytes), "cuMemAllocHost",
          "allocating " + human_bytes(bytes) + " of page-locked host memory");
  data_ = static_cast<std::byte*>(p);
  std::memset(data_, 0, bytes_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) Driver::find()->cuMemFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) Driver::find()->cuMemFreeHost(data_);
}

void SplitWorkspace::reserve(int64_t floats, int64_t counters) {
  if (size_t(floats) * 4 > partial_.bytes()) partial_ = DeviceBuffer(size_t(floats) * 4);
  if (size_t(counters) * 4 > counters_.bytes()) {
    counters_ = DeviceBuffer(size_t(counters) * 4);
    counters_.fill_bytes(0);
  }
}

}  // namespace onecat
