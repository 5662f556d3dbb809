// The Python API runs on the process-wide Session (runtime/engine/session.h).
#pragma once
#include <cstdint>

#include "runtime/engine/session.h"

namespace onecat::python {

using Runtime = Session;

// The CUstream a Python int names (0: the legacy default stream).
inline CUstream as_stream(uintptr_t stream) { return reinterpret_cast<CUstream>(stream); }

}  // namespace onecat::python
