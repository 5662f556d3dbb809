// The server's figures in Prometheus's text format (GET /metrics): requests by endpoint and
// status, prompt and generated tokens, time to first token, time per output token and request
// latency histograms, and the engine's running/waiting requests, KV page usage, prefix-cache
// hit rate and speculative acceptance (as of its last step). Thread-safe: handler threads record, /metrics reads.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace onecat::serve {

// What the engine thread publishes after each step.
struct EngineGauges {
  int64_t running = 0, waiting = 0;
  double kv_usage = 0;  // pages held by requests / all pages (cached, unreferenced pages are free)
  int64_t prompt_tokens = 0, prefix_hit_tokens = 0, preemptions = 0;
  // Speculative decoding (EngineStats): draft tokens verified, accepted, accepted by position.
  int64_t draft_tokens = 0, accepted_tokens = 0;
  std::vector<int64_t> accepted_at;
};

class Metrics {
 public:
  Metrics();
  // `endpoint` is one of the server's routes or "other" (no label per unknown path).
  void request(const std::string& endpoint, int status);
  // One finished generation request: its usage and timings in seconds (tpot < 0: fewer than
  // two tokens).
  void generation(int64_t prompt_tokens, int64_t generated_tokens, double ttft, double tpot, double e2e);
  void engine(const EngineGauges& g);
  std::string text(const std::string& model_name) const;

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<int64_t> counts;  // per bound, not cumulative; +1 for +Inf
    double sum = 0;
    int64_t count = 0;
    void observe(double v);
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_;
  EngineGauges engine_;
};

}  // namespace onecat::serve
