// A gemm launch whatever its strategy: one kernel (gemv, tc_small, mma), or for
// strategy=cublas cuBLAS's fp16 GEMM around the strategy's own kernel (dequantise, epilogue,
// fill: templates/gemm/cublas_aux.cuh). Every gemm launch goes through here (PreparedOp,
// the tuner's rig, the Python package), so a tuned cublas config runs wherever it is chosen.
#pragma once
#include "codegen/family.h"
#include "codegen/gemm/op.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"

namespace onecat::gemm {

// Enqueues y = x · Wᵀ (+ epilogue) on `stream`. strategy=cublas needs args.scratch
// (scratch_bytes) and cuBLAS (an Error saying why it cannot be loaded otherwise); its launches
// share one cuBLAS workspace, so like the scratch they run one at a time (one stream, or
// streams ordered against each other).
void launch_op(const Spec& spec, const Config& config, const LoadedKernel& kernel, const Args& args, CUstream stream);

// Why `config` cannot run on a GPU of compute capability `sm` in this process (strategy=cublas
// without a usable cuBLAS), or empty. `family` and the texts as a tuning record holds them; other
// families and strategies: empty.
std::string unavailable_reason(const std::string& family, const std::string& spec, const std::string& config, int sm);

// Makes the process's cuBLAS handle and workspace for strategy=cublas now (a no-op for other
// strategies), so that no allocation happens in a launch a CUDA graph captures. Throws Error
// when cuBLAS cannot be loaded.
void ready_for_launch(const Config& config);

}  // namespace onecat::gemm

namespace onecat {

// The config `spec` runs with untuned on a GPU of compute capability `sm` in this process: the
// family's default_config, except gemm's strategy=cublas where gemm::cublas_by_default holds and
// cuBLAS can run here (Cublas::unusable_reason). Untuned dispatch, start-up compilation, tuning
// records' and `onecat bench`'s "default" all read it, so the default timed is the one that runs.
std::string default_config_here(const Family& family, const std::string& spec, int64_t m, int sm);
// strategy=cublas's config text where it would be the untuned default of `spec` at m tokens on a
// machine whose cuBLAS can run (gemm::cublas_by_default), else empty (other families too):
// default_config_here's rule without the machine, for compiling another machine's kernels.
std::string untuned_cublas_config(const Family& family, const std::string& spec, int64_t m);

}  // namespace onecat
