#include "runtime/jit/module_table.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/arch.h"
#include "base/error.h"

namespace onecat {

ModuleKey module_key(const std::string& hex) {
  if (hex.size() < 32) throw Error("binary key '" + hex + "' is too short");
  ModuleKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return k;
}

bool programmatic_launch_enabled() {
  static const bool enabled = [] {
    const Driver* d = Driver::find();
    const char* v = std::getenv("ONECAT_PDL");
    return d && d->cuLaunchKernelEx && !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

ModuleTable& ModuleTable::get() {
  static ModuleTable table;
  return table;
}

const LoadedKernel* ModuleTable::find(const ModuleKey& key) const {
  std::shared_lock lock(mutex_);
  auto it = table_.find(key);
  return it == table_.end() ? nullptr : it->second.get();
}

size_t ModuleTable::size() const {
  std::shared_lock lock(mutex_);
  return table_.size();
}

const LoadedKernel& ModuleTable::load(const KernelBinary& binary) {
  const ModuleKey key = module_key(binary.key);
  if (const LoadedKernel* k = find(key)) return *k;
  Driver& d = Driver::require_gpu();
  auto k = std::make_unique<LoadedKernel>();
  const std::string what = binary.spec + " [" + binary.config + "] " + binary.arch;
  d.check(d.cuModuleLoadData(&k->module, binary.cubin.data()), "cuModuleLoadData", "loading the cubin of " + what);
  d.check(d.cuModuleGetFunction(&k->function, k->module, binary.lowered_name.c_str()), "cuModuleGetFunction",
          "finding " + binary.lowered_name + " in " + what);
  d.check(d.cuFuncGetAttribute(&k->registers, kFuncNumRegs, k->function), "cuFuncGetAttribute", "reading registers of " + what);
  k->lowered_name = binary.lowered_name;
  // Every template kernel starts with grid_dependency_sync() (tests/compile_test.cpp holds
  // them to it), so every kernel compiled for sm_90+ waits for the one before it.
  k->programmatic = programmatic_launch_enabled() && Arch::parse(binary.arch).has_programmatic_launch();
  CUmodule module = k->module;
  std::unique_lock lock(mutex_);
  auto [it, inserted] = table_.try_emplace(key, std::move(k));
  if (!inserted) d.cuModuleUnload(module);  // another thread loaded it first
  return *it->second;
}

void launch(const LoadedKernel& kernel, const LaunchGeometry& g, CUstream stream, void** args) {
  Driver& d = *Driver::find();
  constexpr unsigned kDefaultSharedLimit = 48 * 1024;
  if (g.dynamic_shared_bytes > kDefaultSharedLimit && kernel.shared_opt_in.load(std::memory_order_relaxed) < g.dynamic_shared_bytes) {
    d.check(d.cuFuncSetAttribute(kernel.function, kFuncMaxDynamicSharedBytes, int(g.dynamic_shared_bytes)), "cuFuncSetAttribute",
            "allowing " + kernel.lowered_name + " " + std::to_string(g.dynamic_shared_bytes) + " bytes of shared memory");
    kernel.shared_opt_in.store(g.dynamic_shared_bytes, std::memory_order_relaxed);
  }
  CUresult r;
  if (kernel.programmatic) {
    CuLaunchAttribute attr;
    attr.id = kLaunchAttributeProgrammaticStreamSerialization;
    attr.value.value = 1;
    CuLaunchConfig c;
    c.grid[0] = g.grid[0], c.grid[1] = g.grid[1], c.grid[2] = g.grid[2];
    c.block[0] = g.block[0], c.block[1] = g.block[1], c.block[2] = g.block[2];
    c.shared_bytes = g.dynamic_shared_bytes;
    c.stream = stream;
    c.attrs = &attr;
    c.attr_count = 1;
    r = d.cuLaunchKernelEx(&c, kernel.function, args, nullptr);
  } else {
    r = d.cuLaunchKernel(kernel.function, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1], g.block[2],
                         g.dynamic_shared_bytes, stream, args, nullptr);
  }
  if (r != 0) {  // the message is built only on failure: launches are on the hot path
    d.check(r, kernel.programmatic ? "cuLaunchKernelEx" : "cuLaunchKernel",
            "launching " + kernel.lowered_name + " on grid " + std::to_string(g.grid[0]) + "x" +
                std::to_string(g.grid[1]) + "x" + std::to_string(g.grid[2]) + ", block " + std::to_string(g.block[0]) +
                ", " + std::to_string(g.dynamic_shared_bytes) + " bytes of dynamic shared memory");
  }
}

void launch(const LoadedKernel& kernel, const KernelCall& call, CUstream stream) {
  void* args[KernelCall::kMaxArgs];
  for (int i = 0; i < call.count; ++i) args[i] = const_cast<unsigned char*>(call.values[size_t(i)].data());
  launch(kernel, call.geometry, stream, args);
}

}  // namespace onecat
