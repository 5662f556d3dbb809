#include "codegen/embedding/space.h"

#include "codegen/common/row_config.h"

namespace onecat::embedding {
namespace {

// The default CTA: rows of a few hundred bytes share one, long rows take 256 threads (a copy
// has nothing to hide but memory latency).
constexpr int kDefaultCtaThreads = 128;
constexpr int kDefaultMaxRowThreads = 256;

}  // namespace

Config default_config(const Spec& spec, int64_t m) {
  return row_config::default_config<Config>(spec, m, kDefaultMaxRowThreads, kDefaultCtaThreads);
}

std::vector<Config> candidate_configs(const Spec& spec) { return row_config::candidate_configs<Config>(spec); }

bool fits_bucket(const Spec&, const Config& c, int64_t m) { return row_config::fits_bucket(c.rows, m); }

}  // namespace onecat::embedding
