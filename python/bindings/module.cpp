// onecat._C: the C++ side of the onecat Python package. C++ errors become Python ones:
// InputError (bad spec, shape, file) → ValueError, any other onecat::Error → RuntimeError.
#include <execinfo.h>
#include <pybind11/pybind11.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "python/bindings/families.h"

namespace {

// ONECAT_CRASH_BACKTRACE=1: a crash in native code (any thread, e.g. a compile worker)
// prints that thread's C++ frames to stderr before the process dies; Python's faulthandler
// shows only Python frames. For diagnosing, never on by default.
void print_native_backtrace(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char header[] = "onecat: fatal signal in native code; C++ frames of the crashing thread:\n";
  (void)!write(STDERR_FILENO, header, sizeof(header) - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

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
  if (const char* v = getenv("ONECAT_CRASH_BACKTRACE"); v && *v && *v != '0') {
    signal(SIGSEGV, print_native_backtrace);
    signal(SIGABRT, print_native_backtrace);
  }
  onecat::python::bind_core(m);
  onecat::python::bind_rmsnorm(m);
  onecat::python::bind_gemm(m);
  onecat::python::bind_attention(m);
  onecat::python::bind_embedding(m);
  onecat::python::bind_rope(m);
  onecat::python::bind_sampling(m);
  onecat::python::bind_moe(m);
  onecat::python::bind_tokenizer(m);
  onecat::python::bind_chat_template(m);
  onecat::python::bind_model(m);
  onecat::python::bind_engine(m);
}
