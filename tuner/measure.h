// Timing on the GPU with events: warm-up first, then batches of launches timed together
// (single launches of a few microseconds are below the events' resolution), repeated until
// a minimum time and count, reported as the median per launch with its spread. Callers
// rotate their inputs between launches so the L2 never serves a repeat (METHOD.md).
#pragma once
#include <functional>

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
  int max_batches = 2000;
};

// run(i) enqueues launch number i on the default stream.
Timing measure(const std::function<void(int)>& run, const MeasureOptions& options = {});

// Device-to-device copy bandwidth in bytes per second (read + write), as METHOD.md counts it.
double measure_copy_bandwidth(size_t bytes = size_t(1) << 30);

}  // namespace onecat
