// Timing on the GPU with events: warm-up first, then batches of launches timed together
// (single launches of a few microseconds are below the events' resolution), repeated until
// a minimum time and count, reported as the median per launch with its spread. Callers
// rotate their inputs between launches so the L2 never serves a repeat (METHOD.md).
//
// Each batch is queued behind a spin kernel that holds the GPU until the CPU has enqueued the
// whole batch, so the batch's launches run back to back and the events time the GPU, not the
// CPU's launch rate: kernels of a few microseconds otherwise measure the launching thread
// (4-µs configs moved between two tunes run beside other CPU work: docs/tuner.md).
// Back-to-back is how the engine runs them, inside CUDA graphs.
#pragma once
#include <cstdint>
#include <functional>

#include "runtime/cuda/driver.h"

namespace onecat {

struct Timing {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  int launches = 0;  // timed launches in total
};

struct MeasureOptions {
  int warmup = 10;
  int batch = 20;           // launches per event pair
  int min_batches = 10;
  double min_total_ms = 100;
  // Kernels under 25 µs stop at this count, before min_total_ms, so a 2-µs candidate takes
  // about 0.1 s, not 0.7 s; whole-model tunes with this cap repeat their choices within 3 %
  // (docs/tuner.md).
  int max_batches = 200;
  bool queue_ahead = true;  // each batch behind a spin kernel (above)
};

// run(i) enqueues launch number i on the default stream.
Timing measure(const std::function<void(int)>& run, const MeasureOptions& options = {});

// The same timing with each batch captured once into a CUDA graph (run(i, stream) enqueues
// launch i on `stream`, which is being captured) and replayed: back to back without the
// stream's launch-to-launch gap, as a caller that runs its kernels inside graphs (the decode
// step of an engine) sees them. Launch 0 and the warm-up run on `stream` uncaptured, so
// allocations and lazy loading happen before the capture; the replays queue behind a spin
// kernel like measure()'s batches. Timing.launches counts kernel launches, not replays.
Timing measure_graph(const std::function<void(int, CUstream)>& run, const MeasureOptions& options = {});

// Keeps the current context's GPU busy for `ns` nanoseconds of its global timer, on `stream`
// (the legacy default stream unless given; a one-thread kernel, PTX loaded through the driver
// once per context).
void gpu_spin(uint64_t ns, CUstream stream = nullptr);

// Device-to-device copy bandwidth in bytes per second (read + write), as METHOD.md counts it.
double measure_copy_bandwidth(size_t bytes = size_t(1) << 30);

}  // namespace onecat
