#include "tuner/measure.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "base/error.h"
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

class Stream {
 public:
  Stream() {
    Driver& d = Driver::require_gpu();
    d.check(d.cuStreamCreate(&stream_, 0), "cuStreamCreate", "creating a stream to capture");
  }
  ~Stream() { Driver::find()->cuStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }

 private:
  CUstream stream_ = nullptr;
};

// A captured and instantiated graph.
class Graph {
 public:
  Graph(const std::function<void(CUstream)>& record, CUstream stream) {
    Driver& d = Driver::require_gpu();
    d.check(d.cuStreamBeginCapture(stream, kCaptureModeRelaxed), "cuStreamBeginCapture", "capturing a batch of launches");
    try {
      record(stream);
    } catch (...) {
      CUgraph broken = nullptr;
      d.cuStreamEndCapture(stream, &broken);
      if (broken) d.cuGraphDestroy(broken);
      throw;
    }
    d.check(d.cuStreamEndCapture(stream, &graph_), "cuStreamEndCapture", "capturing a batch of launches");
    if (CUresult r = d.cuGraphInstantiateWithFlags(&exec_, graph_, 0); r != 0) {
      d.cuGraphDestroy(graph_);
      d.check(r, "cuGraphInstantiateWithFlags", "instantiating a batch of launches");
    }
  }
  ~Graph() {
    Driver* d = Driver::find();
    d->cuGraphExecDestroy(exec_);
    d->cuGraphDestroy(graph_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  CUgraphExec exec() const { return exec_; }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// Spins one thread until `ns` nanoseconds of %globaltimer have passed. PTX 6.0 for sm_70: the
// driver compiles it for whichever GPU the context has (no NVRTC needed).
constexpr const char* kSpinPtx = R"(.version 6.0
.target sm_70
.address_size 64
.visible .entry onecat_spin(.param .u64 onecat_spin_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [onecat_spin_ns];
  mov.u64 %rd2, %globaltimer;
$Lspin:
  mov.u64 %rd3, %globaltimer;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $Lspin;
  ret;
}
)";

CUfunction spin_function() {
  Driver& d = Driver::require_gpu();
  CUcontext ctx = nullptr;
  d.check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent", "finding the context for the timing spin kernel");
  if (!ctx) throw Error("timing needs a current CUDA context (select a GPU first)");
  static std::mutex mutex;
  static std::map<CUcontext, CUfunction> functions;  // modules stay loaded for the process
  std::lock_guard lock(mutex);
  if (auto it = functions.find(ctx); it != functions.end()) return it->second;
  CUmodule module = nullptr;
  CUfunction f = nullptr;
  d.check(d.cuModuleLoadData(&module, kSpinPtx), "cuModuleLoadData", "loading the timing spin kernel (PTX)");
  d.check(d.cuModuleGetFunction(&f, module, "onecat_spin"), "cuModuleGetFunction", "finding the timing spin kernel");
  functions.emplace(ctx, f);
  return f;
}

}  // namespace

void gpu_spin(uint64_t ns, CUstream stream) {
  Driver& d = Driver::require_gpu();
  unsigned long long arg = ns;
  void* args[] = {&arg};
  d.check(d.cuLaunchKernel(spin_function(), 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr), "cuLaunchKernel",
          "launching the timing spin kernel");
}

// Batches until the options' counts, each queued behind a spin of `spin_ns` (queue_ahead) and
// timed between events on `stream`; the median, spread and count per launch.
static Timing time_batches(const MeasureOptions& o, uint64_t spin_ns, CUstream stream, const std::function<void()>& enqueue_batch) {
  Driver& d = Driver::require_gpu();
  Event start, stop;
  std::vector<double> per_launch_us;
  double total_ms = 0;
  while ((int(per_launch_us.size()) < o.min_batches || total_ms < o.min_total_ms) &&
         int(per_launch_us.size()) < o.max_batches) {
    if (o.queue_ahead) gpu_spin(spin_ns);
    d.check(d.cuEventRecord(start.get(), stream), "cuEventRecord", "timing");
    enqueue_batch();
    d.check(d.cuEventRecord(stop.get(), stream), "cuEventRecord", "timing");
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

Timing measure(const std::function<void(int)>& run, const MeasureOptions& o) {
  Driver& d = Driver::require_gpu();
  int launch = 0;
  run(launch++);  // first use (a lazily loaded module) is not part of the launch rate below
  const auto enqueue_start = std::chrono::steady_clock::now();
  for (int i = 1; i < o.warmup; ++i) run(launch++);
  const double enqueue_ns_per_launch =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - enqueue_start).count() /
      std::max(1, o.warmup - 1);
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "warming up");
  // Long enough for the CPU to enqueue a batch four times over, at least 20 µs, at most 20 ms.
  const uint64_t spin_ns = uint64_t(std::clamp(4.0 * enqueue_ns_per_launch * o.batch + 20e3, 20e3, 20e6));
  return time_batches(o, spin_ns, nullptr, [&] {
    for (int i = 0; i < o.batch; ++i) run(launch++);
  });
}

Timing measure_graph(const std::function<void(int, CUstream)>& run, const MeasureOptions& o) {
  Driver& d = Driver::require_gpu();
  Stream stream;
  for (int i = 0; i < std::max(1, o.warmup); ++i) run(i, stream.get());
  d.check(d.cuStreamSynchronize(stream.get()), "cuStreamSynchronize", "warming up");
  const Graph graph([&](CUstream s) { for (int i = 0; i < o.batch; ++i) run(i, s); }, stream.get());
  d.check(d.cuGraphLaunch(graph.exec(), stream.get()), "cuGraphLaunch", "warming up the graph");
  d.check(d.cuStreamSynchronize(stream.get()), "cuStreamSynchronize", "warming up the graph");
  // One replay per batch; the stream (created blocking) waits for the legacy stream's spin.
  return time_batches(o, 20000, stream.get(), [&] {
    d.check(d.cuGraphLaunch(graph.exec(), stream.get()), "cuGraphLaunch", "timing");
  });
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
