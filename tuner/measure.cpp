#include "tuner/measure.h"

#include <algorithm>
#include <vector>

#include "runtime/cuda/driver.h"

namespace onecat {
namespace {

class Event {
 public:
  Event() {
    Driver& d = Driver::require_gpu();
    d.check(d.cuEventCreate(&event_, 0), "cuEventCreate", "creating a timing event");
  }
  ~Event() { Driver::find()->cuEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

}  // namespace

Timing measure(const std::function<void(int)>& run, const MeasureOptions& o) {
  Driver& d = Driver::require_gpu();
  int launch = 0;
  for (int i = 0; i < o.warmup; ++i) run(launch++);
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "warming up");
  Event start, stop;
  std::vector<double> per_launch_us;
  double total_ms = 0;
  while ((int(per_launch_us.size()) < o.min_batches || total_ms < o.min_total_ms) &&
         int(per_launch_us.size()) < o.max_batches) {
    d.check(d.cuEventRecord(start.get(), nullptr), "cuEventRecord", "timing");
    for (int i = 0; i < o.batch; ++i) run(launch++);
    d.check(d.cuEventRecord(stop.get(), nullptr), "cuEventRecord", "timing");
    d.check(d.cuEventSynchronize(stop.get()), "cuEventSynchronize", "timing");
    float ms = 0;
    d.check(d.cuEventElapsedTime(&ms, start.get(), stop.get()), "cuEventElapsedTime", "timing");
    total_ms += ms;
    per_launch_us.push_back(1e3 * ms / o.batch);
  }
  std::sort(per_launch_us.begin(), per_launch_us.end());
  Timing t;
  t.median_us = per_launch_us[per_launch_us.size() / 2];
  t.min_us = per_launch_us.front();
  t.max_us = per_launch_us.back();
  t.launches = int(per_launch_us.size()) * o.batch;
  return t;
}

double measure_copy_bandwidth(size_t bytes) {
  Driver& d = Driver::require_gpu();
  DeviceBuffer a(bytes), b(bytes);
  a.fill_bytes(1);
  Timing t = measure([&](int i) {
    d.check(i % 2 ? d.cuMemcpyDtoDAsync(a.ptr(), b.ptr(), bytes, nullptr) : d.cuMemcpyDtoDAsync(b.ptr(), a.ptr(), bytes, nullptr),
            "cuMemcpyDtoDAsync", "measuring copy bandwidth");
  }, MeasureOptions{3, 4, 5, 50, 50});
  return 2.0 * double(bytes) / (t.median_us * 1e-6);
}

}  // namespace onecat
