// `onecat bench`: one spec of any family at several token counts (m: tokens; sequences for
// attention decode and verify), each config checked against the family's reference in the run,
// timed on the family's workload (tuner/workload.h, found through the harness registry), and
// set against its ceilings: the bytes a launch must move at the measured copy bandwidth and,
// for families that compute, its flops at the fp16 tensor rate cuBLAS reaches on this GPU; and
// against a peer where the family has one (gemm: cuBLAS on the dequantised weights).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/session.h"
#include "tuner/measure.h"

namespace onecat {

struct BenchPoint {
  int64_t m = 0;
  std::string config;
  std::string default_config;                         // the family default for this m
  double default_us = 0;                              // its time, when a sweep or --config chose another config
  int candidates = 0;                                 // configs timed by a sweep
  std::vector<std::pair<std::string, double>> swept;  // each timed candidate and its brief median (µs)
  Timing ours;
  double bytes = 0;     // at least moved per launch (Workload::traffic)
  double gbps = 0;      // bytes per second
  double pct_copy = 0;  // of the measured device copy bandwidth
  double flops = 0;     // per launch; 0 for a family that is all memory traffic
  double tflops = 0;
  double pct_peak = 0;             // of the measured fp16 tensor rate (0 when not measured)
  double bandwidth_floor_us = 0;   // bytes at the copy bandwidth
  double flop_floor_us = 0;        // flops at the measured fp16 tensor rate (0 when not measured)
  double error_vs_reference = -1;  // the family check's error, which must pass
  double peer_us = 0;              // 0 when no peer ran
  double speedup_vs_peer = 0;
  double error_vs_peer = -1;  // ‖ours − peer‖ / ‖peer‖ on the same inputs
};

struct BenchResult {
  std::string spec;
  std::string family;
  int64_t context = 0;  // keys per sequence when given (attention decode and verify), else 0
  std::string device;
  double copy_gbps = 0;
  double peak_tflops = 0;  // cuBLAS fp16 on a large square product; 0 when no point computes or no cuBLAS
  std::string peer;        // "cuBLAS", or empty when the family has none for this spec
  std::vector<BenchPoint> points;
};

struct BenchOptions {
  std::string config;  // empty: the family default for each m
  bool sweep = false;  // time every tuning candidate for m (tuning_candidates), keep the fastest
  int jobs = 8;        // parallel compiles for a sweep
  bool graph = false;  // time with measure_graph (ours and the peer), else measure
  int64_t context = 0;  // > 0: attention decode/verify over m sequences of this many keys each
};

// One line of an `onecat bench --shapes` file: `SPEC M[,M…] [ctx=N]` (blank lines and `#`
// comments skipped); ctx, the keys per sequence, only for attention decode and verify.
struct BenchShape {
  std::string spec;  // canonical
  std::vector<int64_t> ms;
  int64_t context = 0;
  int line = 0;  // 1-based, in the file
};

// Token counts written `1,2,16`: each in [1, 2^20]; InputError naming `what` (e.g. "--m")
// otherwise.
std::vector<int64_t> parse_token_counts(const std::string& text, const std::string& what);

// Every line of a shapes file (`where` names it in errors), checked before anything runs: an
// unknown or malformed spec, a bad count or a misplaced ctx is an InputError naming the file
// and line; a file without a point is one too.
std::vector<BenchShape> parse_bench_shapes(const std::string& text, const std::string& where);

// On the session's GPU (GPU 0). Throws Error when a config it times fails its check.
BenchResult bench_spec(Session& session, const std::string& spec, const std::vector<int64_t>& ms,
                       const BenchOptions& options);

}  // namespace onecat
