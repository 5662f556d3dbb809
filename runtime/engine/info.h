// What this machine offers onecat, as one JSON object: the CUDA driver and GPUs (or why
// there are none), every NVRTC found with its archs, cuBLAS, the kernel families and the
// kernel cache. `onecat info --json` prints it; the Python package returns it from info().
#pragma once
#include <nlohmann/json.hpp>

namespace onecat {

nlohmann::json machine_info();

}  // namespace onecat
