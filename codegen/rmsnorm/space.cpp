#include "codegen/rmsnorm/space.h"

#include "codegen/common/row_config.h"

namespace onecat::rmsnorm {
namespace {

// The default aims at this many CTA threads, a common sweet spot for memory-bound rows.
constexpr int kDefaultCtaThreads = 128;

}  // namespace

// Rows too wide for the registers a thread of the CTA has take more row_threads, up to a whole CTA.
Config default_config(const Spec& spec, int64_t m) {
  return row_config::default_config<Config>(spec, m, Config::kMaxCtaThreads, kDefaultCtaThreads);
}

std::vector<Config> candidate_configs(const Spec& spec) { return row_config::candidate_configs<Config>(spec); }

bool fits_bucket(const Spec&, const Config& c, int64_t m) { return row_config::fits_bucket(c.rows, m); }

}  // namespace onecat::rmsnorm
