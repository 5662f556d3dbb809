// onecat._C: the C++ side of the onecat Python package. C++ errors become Python ones:
// InputError (bad spec, shape, file) → ValueError, any other onecat::Error → RuntimeError.
#include <pybind11/pybind11.h>

#include "python/bindings/families.h"
#include "runtime/cuda/error.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "onecat's C++ runtime: kernel generation, NVRTC, the kernel cache, the tuner and launches";
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const onecat::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const onecat::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  onecat::python::bind_core(m);
  onecat::python::bind_rmsnorm(m);
  onecat::python::bind_gemm(m);
  onecat::python::bind_attention(m);
}
