// Host time per launch through a PreparedOp (runtime/engine/prepared_op.h) against a bare
// cuLaunchKernel of the same kernel with its argument array packed once: what the typed op
// layer costs the engine's hot path (target ≤ 1.2× bare). The stream sits behind a spin
// kernel while the loop enqueues, so only the host's work is timed. Each op is also captured
// into a CUDA graph and replayed (measure_graph) to show the path captures. Needs a GPU.
//   host_overhead [out.json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/attention/emit.h"
#include "codegen/attention/op.h"
#include "codegen/gemm/emit.h"
#include "codegen/gemm/op.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/prepared_op.h"
#include "runtime/engine/session.h"
#include "tuner/measure.h"

namespace onecat {
namespace {

constexpr int kLaunches = 200;  // per round, all queued behind one spin kernel
constexpr int kRounds = 30;

// Median host microseconds per launch of enqueue(i), the GPU kept busy meanwhile.
double host_us_per_launch(const std::function<void(int)>& enqueue) {
  Driver& d = *Driver::find();
  std::vector<double> per_launch;
  for (int r = 0; r < kRounds; ++r) {
    gpu_spin(20'000'000);  // 20 ms: longer than any round's enqueueing
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) enqueue(i);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "a host-overhead round");
    if (r > 2) per_launch.push_back(us / kLaunches);  // the first rounds warm caches up
  }
  std::nth_element(per_launch.begin(), per_launch.begin() + per_launch.size() / 2, per_launch.end());
  return per_launch[per_launch.size() / 2];
}

template <class Op, class Args>
nlohmann::json compare(const std::string& name, Op& op, const Args& args, int64_t m) {
  // One launch through the op first: it also allows the kernel its dynamic shared memory
  // beyond 48 KiB, without which the bare launches below would fail (and time nothing).
  op.launch(args, m, nullptr);
  const KernelCall call = make_call(op.spec(), op.config(m), args);
  const LoadedKernel& kernel = op.kernel(m);
  void* packed[KernelCall::kMaxArgs];
  for (int i = 0; i < call.count; ++i) packed[i] = const_cast<unsigned char*>(call.values[size_t(i)].data());
  Driver& d = *Driver::find();
  const LaunchGeometry g = call.geometry;
  CUresult failed = 0;
  const double bare = host_us_per_launch([&](int) {
    const CUresult r = d.cuLaunchKernel(kernel.function, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1],
                                        g.block[2], g.dynamic_shared_bytes, nullptr, packed, nullptr);
    if (r != 0) failed = r;
  });
  d.check(failed, "cuLaunchKernel", "a bare launch of " + name);
  const double prepared = host_us_per_launch([&](int) { op.launch(args, m, nullptr); });
  const Timing graph = measure_graph([&](int, CUstream s) { op.launch(args, m, s); });
  nlohmann::json j = {{"op", name},
                      {"config", op.spec().to_string() + " [" + op.config(m).to_string() + "]"},
                      {"bare_launch_host_us", bare},
                      {"prepared_op_host_us", prepared},
                      {"ratio", prepared / bare},
                      {"graph_replay_gpu_us_per_launch", graph.median_us}};
  std::printf("%-44s bare %.2f us, PreparedOp %.2f us (%.2fx), in a graph %.2f us of GPU per launch\n", name.c_str(), bare,
              prepared, prepared / bare, graph.median_us);
  return j;
}

}  // namespace
}  // namespace onecat

int main(int argc, char** argv) {
  using namespace onecat;
  try {
    Session& session = Session::get();
    session.use_gpu(0);
    nlohmann::json out = nlohmann::json::array();

    PreparedOp<gemm::Spec, gemm::Config, gemm::Args> gemm_op(session, "gemm:n=4096,k=4096,fmt=f16");
    for (int64_t m : {1, 16}) {
      DeviceBuffer y(size_t(m) * 4096 * 2), x(size_t(m) * 4096 * 2), w(size_t(4096) * 4096 * 2);
      y.fill_bytes(0), x.fill_bytes(0), w.fill_bytes(0);
      const int64_t ws = gemm_op.workspace_bytes(m);
      DeviceBuffer workspace(size_t(std::max<int64_t>(ws, 4)));
      workspace.fill_bytes(0);
      gemm::Args a;
      a.y = y.ptr(), a.x = x.ptr(), a.qweight = w.ptr(), a.m = m;
      const int64_t floats = gemm::workspace_floats(gemm_op.spec(), gemm_op.config(m), m);
      a.partial = ws ? workspace.ptr() : 0, a.counters = ws ? workspace.ptr() + CUdeviceptr(floats * 4) : 0;
      out.push_back(compare("gemm f16 4096x4096, " + std::to_string(m) + " tokens", gemm_op, a, m));
    }

    // Decode over 8 sequences of 4096 keys, every page of every sequence the same page.
    PreparedOp<attention::Spec, attention::Config, attention::Args> decode(
        session, "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16");
    const int64_t batch = 8, ctx = 4096, pages = ctx / 16;
    DeviceBuffer kc(size_t(16) * 8 * 128 * 2 * 2), vc(kc.bytes()), q(size_t(batch) * 32 * 128 * 2), o(q.bytes());
    kc.fill_bytes(0), vc.fill_bytes(0), q.fill_bytes(0);
    DeviceBuffer table(size_t(batch * pages) * 4), lens(size_t(batch) * 4);
    table.fill_bytes(0);
    const std::vector<int> seq(static_cast<size_t>(batch), static_cast<int>(ctx));
    lens.upload(seq.data(), seq.size() * 4);
    const int64_t ws = decode.workspace_bytes(batch);
    DeviceBuffer workspace(size_t(std::max<int64_t>(ws, 4)));
    workspace.fill_bytes(0);
    attention::Args a;
    a.out = o.ptr(), a.q = q.ptr(), a.k_cache = kc.ptr(), a.v_cache = vc.ptr(), a.block_table = table.ptr();
    a.max_pages = int(pages), a.seq_lens = lens.ptr(), a.sm_scale = 1.f / std::sqrt(128.f), a.batch = batch;
    const int64_t floats = attention::workspace_floats(decode.spec(), decode.config(batch), batch);
    a.partial = ws ? workspace.ptr() : 0, a.counters = ws ? workspace.ptr() + CUdeviceptr(floats * 4) : 0;
    out.push_back(compare("decode attention f16 KV, 8 x 4096 keys", decode, a, batch));

    if (argc > 1) std::ofstream(argv[1]) << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
