// Programmatic dependent launch (sm_90+). onecat launches its sm_90+ kernels with programmatic
// stream serialization (runtime/jit/module_table.cpp), so a kernel's CTAs may be scheduled
// while the kernel before it in the stream is still running. Every kernel therefore calls
// grid_dependency_sync() before it reads anything a kernel of the pass may write: it lets the
// next kernel in the stream be scheduled (its CTAs wait here in turn, once every CTA of this one
// has started), then waits until the kernels this one depends on have completed and their writes
// are visible. The next kernel's launch and its CTAs' start overlap this one's tail instead of
// following it. Before the wait a kernel touches only what no kernel writes: weights, and, where
// the launch says so (attention::Args::tables_from_host, rope::Args::positions_from_host), the
// pass's batch tables, which the host copied on the same stream before the pass's first kernel.
// Below sm_90 it is nothing, and the launch is an ordinary one.
#pragma once

namespace onecat {

__device__ __forceinline__ void grid_dependency_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory");
#endif
}

// Asks L2 for a line a kernel will read after grid_dependency_sync() and that no kernel before
// it writes (weights), so that it arrives while the kernel before finishes. Nothing below
// sm_90, where there is no such overlap.
__device__ __forceinline__ void grid_dependency_prefetch_l2(const void* ptr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
#else
  (void)ptr;
#endif
}

}  // namespace onecat
