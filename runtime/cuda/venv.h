// The project's virtual environment, where scripts/setup installs NVIDIA's pinned PyPI wheels
// (CUDA 12.8's NVRTC and cuBLAS: the newest that still serve sm_70), and the libraries in it.
#pragma once
#include <string>
#include <vector>

namespace onecat {

// $ONECAT_VENV, else the checkout's .venv the build was configured with; empty when neither.
std::string project_venv();

// The files matching `pattern` (a glob below the venv's site-packages, e.g.
// "nvidia/cublas/lib/libcublas.so.12"), sorted; none without a venv.
std::vector<std::string> venv_files(const std::string& venv, const std::string& pattern);

}  // namespace onecat
