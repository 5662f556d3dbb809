// What a kernel binding keeps per distinct shape of its arguments: the canonical spec, made
// and checked on the shape's first call (so a shape without a kernel is reported before any
// driver call, as every bad argument is), and the PreparedOp, made on the first call that
// reaches the GPU. Later calls find the shape by its numbers and build, parse and look up no
// text (ARCHITECTURE.md rule 4). Used by the embedding, rope and sampling bindings.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "python/bindings/families.h"
#include "python/bindings/runtime.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/prepared_op.h"

namespace onecat::python {

// A workspace a kernel leaves zero after every launch (argmax's split partials, the moe route's
// counter), kept with its shape: room for `bytes`, grown on `device` when short. Growing waits
// for the GPU before (no launch in flight still uses the old buffer) and after (the new one is
// zero before a launch on any stream); `what` names it in a CUDA error.
struct ZeroedWorkspace {
  DeviceBuffer buffer;
  int device = -1;

  void reserve(int64_t bytes, int on_device, const char* what) {
    if (bytes <= 0 || (device == on_device && int64_t(buffer.bytes()) >= bytes)) return;
    Driver& d = *Driver::find();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", std::string("growing the ") + what);
    buffer = DeviceBuffer(size_t(bytes));
    buffer.fill_bytes(0);
    device = on_device;
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", std::string("zeroing the ") + what);
  }
};

template <class Spec, class Config, class Args>
struct PreparedShape {
  using Op = PreparedOp<Spec, Config, Args>;
  std::string spec;
  std::unique_ptr<Op> op;

  // A compiled kernel (onecat.compile) is called with arguments of another spec.
  void check_kernel_spec(const std::string& kernel_spec, std::string_view label) const {
    if (!kernel_spec.empty() && kernel_spec != spec) {
      throw py::value_error(std::string(label) + ": this kernel is " + kernel_spec + " but the arguments need " + spec);
    }
  }

  struct Chosen {
    const LoadedKernel* kernel;
    Spec spec;
    Config config;
  };
  // The kernel for m: the prepared op's dispatched one, or a compiled kernel's own config
  // (parsed here: that is not the dispatched hot path).
  Chosen choose(int64_t m, const std::string& config) {
    if (config.empty()) {
      if (!op) op = std::make_unique<Op>(Runtime::get(), spec);
      return {&op->kernel(m), op->spec(), op->config(m)};
    }
    const Spec s = Spec::parse(spec);
    return {&Runtime::get().kernel_with_config(spec, config), s, Config::parse(s, config)};
  }
};

// The entry of `key`, made with make_spec() (which throws for a shape without a kernel, and
// then nothing is added) on the key's first use.
template <class Shape, class Key, class MakeSpec>
Shape& prepared_shape(std::map<Key, Shape>& table, const Key& key, MakeSpec&& make_spec) {
  if (auto it = table.find(key); it != table.end()) return it->second;
  Shape s;
  s.spec = make_spec();
  return table.emplace(key, std::move(s)).first->second;
}

}  // namespace onecat::python
