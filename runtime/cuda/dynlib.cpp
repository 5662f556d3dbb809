#include "runtime/cuda/dynlib.h"

#include <dlfcn.h>
#include <link.h>

#include <utility>

#include "base/error.h"

namespace onecat {

DynLib DynLib::open(const std::string& name_or_path) {
  DynLib lib;
  lib.name_ = name_or_path;
  dlerror();
  lib.handle_ = dlopen(name_or_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle_) {
    const char* err = dlerror();
    lib.error_ = err ? err : "dlopen failed";
  }
  return lib;
}

DynLib::DynLib(DynLib&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)), error_(std::move(other.error_)) {}

DynLib& DynLib::operator=(DynLib&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
    error_ = std::move(other.error_);
  }
  return *this;
}

DynLib::~DynLib() {
  // Libraries stay mapped: CUDA libraries register atexit handlers and must outlive them.
}

std::string DynLib::path() const {
  if (!handle_) return name_;
  link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return name_;
}

void* DynLib::symbol(const char* name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

void* DynLib::require(const char* name) const {
  void* p = symbol(name);
  if (!p) throw Error(std::string("symbol ") + name + " is missing from " + path() + "; the library is too old or not the one expected");
  return p;
}

}  // namespace onecat
