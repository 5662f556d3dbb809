// One kernel launch as data: its geometry and its packed arguments. A family's op builds it
// from typed Args (codegen/<family>/op.h: the only place a kernel's argument list is written
// down); runtime/jit's launch() hands it to the driver. No driver types here, so codegen
// stays below the runtime; building one allocates nothing and touches no text.
#pragma once
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "codegen/family.h"

namespace onecat {

// A device address as the kernels take it (CUdeviceptr); 0 for an absent pointer.
using DevicePtr = uint64_t;

struct KernelCall {
  static constexpr int kMaxArgs = 32;  // moe op=decode takes 29
  LaunchGeometry geometry;
  int count = 0;
  // Each argument's bytes in its own 8-byte slot: cuLaunchKernel reads each through a pointer.
  alignas(8) std::array<std::array<unsigned char, 8>, kMaxArgs> values{};

  template <class T>
  KernelCall& arg(T value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
    if (count >= kMaxArgs) std::abort();  // a kernel with more arguments: raise kMaxArgs
    std::memcpy(values[size_t(count++)].data(), &value, sizeof value);
    return *this;
  }
};

}  // namespace onecat
