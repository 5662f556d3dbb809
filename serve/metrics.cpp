#include "serve/metrics.h"

#include <cstdio>

namespace onecat::serve {
namespace {

// vLLM's buckets (seconds), so dashboards made for it read these.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                         0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
const std::vector<double> kTpotBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4,
                                         0.5,  0.75,  1.0,  2.5,   5.0, 7.5,  10.0, 20.0, 40.0};
const std::vector<double> kE2eBounds = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,  2.5, 5.0,
                                        10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0};

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void Metrics::Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

Metrics::Metrics() {
  for (auto [h, b] : {std::pair{&ttft_, &kTtftBounds}, {&tpot_, &kTpotBounds}, {&e2e_, &kE2eBounds}}) {
    h->bounds = *b;
    h->counts.assign(b->size() + 1, 0);
  }
}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::generation(int64_t prompt_tokens, int64_t generated_tokens, double ttft, double tpot, double e2e) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt_tokens;
  generated_tokens_ += generated_tokens;
  ttft_.observe(ttft);
  if (tpot >= 0) tpot_.observe(tpot);
  e2e_.observe(e2e);
}

void Metrics::engine(const EngineGauges& g) {
  std::lock_guard lock(mutex_);
  engine_ = g;
}

std::string Metrics::text(const std::string& model_name) const {
  std::lock_guard lock(mutex_);
  const std::string model = "model_name=\"" + escaped(model_name) + "\"";
  std::string out;
  const auto head = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  const auto sample = [&](const std::string& name, const std::string& labels, double v) {
    out += name + "{" + labels + "} " + number(v) + "\n";
  };
  head("onecat_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
  for (const auto& [key, n] : requests_) {
    sample("onecat_requests_total",
           model + ",endpoint=\"" + escaped(key.first) + "\",status=\"" + std::to_string(key.second) + "\"", double(n));
  }
  head("onecat_prompt_tokens_total", "counter", "Prompt tokens of finished generation requests.");
  sample("onecat_prompt_tokens_total", model, double(prompt_tokens_));
  head("onecat_generation_tokens_total", "counter", "Tokens generated for finished generation requests.");
  sample("onecat_generation_tokens_total", model, double(generated_tokens_));
  const auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    head(name, "histogram", help);
    int64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(std::string(name) + "_bucket", model + ",le=\"" + number(h.bounds[i]) + "\"", double(cumulative));
    }
    sample(std::string(name) + "_bucket", model + ",le=\"+Inf\"", double(h.count));
    sample(std::string(name) + "_sum", model, h.sum);
    sample(std::string(name) + "_count", model, double(h.count));
  };
  histogram("onecat_time_to_first_token_seconds", "Seconds from a request's arrival to its first token.", ttft_);
  histogram("onecat_time_per_output_token_seconds", "Seconds per generated token after the first.", tpot_);
  histogram("onecat_e2e_request_latency_seconds", "Seconds from a request's arrival to its end.", e2e_);
  head("onecat_num_requests_running", "gauge", "Requests in the engine's running batch.");
  sample("onecat_num_requests_running", model, double(engine_.running));
  head("onecat_num_requests_waiting", "gauge", "Requests queued in the engine (new or preempted).");
  sample("onecat_num_requests_waiting", model, double(engine_.waiting));
  head("onecat_kv_cache_usage_perc", "gauge", "Fraction of KV pages held by requests (1 = full).");
  sample("onecat_kv_cache_usage_perc", model, engine_.kv_usage);
  head("onecat_prefix_cache_hit_rate", "gauge", "Prompt tokens found in the prefix cache / prompt tokens, so far.");
  sample("onecat_prefix_cache_hit_rate", model,
         engine_.prompt_tokens > 0 ? double(engine_.prefix_hit_tokens) / double(engine_.prompt_tokens) : 0.0);
  head("onecat_num_preemptions_total", "counter", "Requests preempted for want of KV pages.");
  sample("onecat_num_preemptions_total", model, double(engine_.preemptions));
  head("onecat_spec_decode_num_draft_tokens_total", "counter", "Speculative draft tokens verified.");
  sample("onecat_spec_decode_num_draft_tokens_total", model, double(engine_.draft_tokens));
  head("onecat_spec_decode_num_accepted_tokens_total", "counter", "Speculative draft tokens accepted.");
  sample("onecat_spec_decode_num_accepted_tokens_total", model, double(engine_.accepted_tokens));
  head("onecat_spec_decode_num_accepted_tokens_per_pos_total", "counter",
       "Speculative draft tokens accepted at each draft position (0: the first).");
  for (size_t k = 0; k < engine_.accepted_at.size(); ++k) {
    sample("onecat_spec_decode_num_accepted_tokens_per_pos_total", model + ",position=\"" + std::to_string(k) + "\"",
           double(engine_.accepted_at[k]));
  }
  return out;
}

}  // namespace onecat::serve
