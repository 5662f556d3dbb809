// The paged K/V cache arguments shared by the attention and rope bindings (defined in
// python/bindings/attention.cpp): caches [pages][kv_heads][page][dim], float16 or fp8 codes.
#pragma once
#include <string>

#include "python/bindings/array.h"

namespace onecat::python {

// The K and V caches and their kv type ("f16", "e4m3", "e5m2") from the dtype and the `kv`
// argument (needed for uint8 caches); ValueError/TypeError naming `label` otherwise.
struct Caches {
  ArrayView k, v;
  std::string kv;
};
Caches caches_of(py::handle k_cache, py::handle v_cache, const std::string& kv, const std::string& label, int device);

// k_scale / v_scale: none for fp16 caches; fp32 [1] (returns "tensor") or [kv_heads] ("head")
// for fp8, read into ks and vs. Returns "none" for fp16.
std::string scales_of(py::handle k_scale, py::handle v_scale, const Caches& c, ArrayView& ks, ArrayView& vs,
                      const std::string& label);

}  // namespace onecat::python
