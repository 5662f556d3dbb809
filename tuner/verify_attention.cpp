#include "tuner/verify_attention.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"
#include "base/half.h"
#include "codegen/attention/emit.h"
#include "runtime/cpu/attention.h"

namespace onecat {
namespace {

using attention::Op;

constexpr unsigned char kPoisonByte = 0xff;  // fp16 NaN
constexpr int kGuardTokens = 2;
// Per (token, head) row: ‖gpu − ref‖₂ / max(‖ref‖₂, kRowFloor). Both sides use the same
// decoded K/V; the GPU rounds P to fp16 (2^-11 relative) for the tensor cores and sums in
// fp32, the output rounds to fp16 (2^-11): 1e-2 is a few times what that gives, and a wrong
// key, mask or page moves a row by far more. A row that sees no key must be exactly 0.
constexpr double kRowTolerance = 1e-2;
constexpr double kRowFloor = 1e-2;

CheckResult check_kv_write(const attention::Spec& s, const attention::Config& cfg, const LoadedKernel& kernel,
                           const AttentionCase& ac, uint64_t seed) {
  std::mt19937_64 rng(seed);
  KvWriteBatch b = make_kv_write_batch(s, ac, rng);
  const DeviceKvWriteBatch in(s, b);
  launch_kv_write(kernel, s, cfg, b, in);
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + s.to_string() + " [" + cfg.to_string() + "]");
  HostKvCache& cache = b.cache;
  std::vector<uint8_t> got_k(cache.k.size()), got_v(cache.v.size());
  in.cache.k.download(got_k.data(), got_k.size()), in.cache.v.download(got_v.data(), got_v.size());
  cpu::kv_write(cache.view(s), b.k.data(), b.v.data(), b.slots.data(), b.tokens);
  const int tokens = b.tokens;

  CheckResult r;
  r.rows = tokens, r.seed = seed, r.tolerance = 0, r.metric = "cache bytes differing from the reference (bit-exact)";
  int64_t wrong = 0;
  for (size_t i = 0; i < got_k.size(); ++i) {
    if (got_k[i] != cache.k[i] || got_v[i] != cache.v[i]) {
      if (wrong++ == 0) r.detail = "cache byte " + std::to_string(i) + " differs (k " + std::to_string(got_k[i]) + " vs " + std::to_string(cache.k[i]) + ")";
    }
  }
  r.error = double(wrong);
  r.passed = wrong == 0;
  return r;
}

}  // namespace

AttentionCase attention_case_for(const std::string& spec_text, int64_t m, uint64_t seed) {
  const attention::Spec s = attention::Spec::parse(spec_text);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  AttentionCase c;
  m = std::max<int64_t>(m, 1);
  if (s.op == Op::kKvWrite) return {{int(m) + 7}, {int(m)}};
  if (s.op == Op::kPrefill) {
    // Up to three sequences sharing m tokens; the second has a paged prefix.
    const int n = int(std::min<int64_t>(m, 3));
    int64_t left = m;
    for (int b = 0; b < n; ++b) {
      // Unequal shares, each at least one token, summing to m.
      const int64_t share = std::clamp<int64_t>(left / (n - b) + (b == 0 ? 3 : -1), 1, left - (n - b - 1));
      const int q = b + 1 == n ? int(left) : int(share);
      left -= q;
      const int prefix = b == 1 ? int(std::uniform_int_distribution<int>(1, 300)(rng)) : 0;
      c.q_lens.push_back(q), c.seq_lens.push_back(prefix + q);
    }
    return c;
  }
  std::uniform_int_distribution<int> len(s.q, 700);
  for (int64_t b = 0; b < m; ++b) {
    int l = len(rng);
    if (b == 0) l = s.q;                  // the shortest sequence there is
    if (b == 1) l = 3 * s.page;           // ends on a page boundary
    if (b == 2) l = 17 * 256 + s.q + 5;   // long enough for 16 splits of at least 256 keys each
    c.seq_lens.push_back(l), c.q_lens.push_back(s.q);
  }
  return c;
}

AttentionCheck::AttentionCheck(const std::string& spec_text, const AttentionCase& ac, uint64_t seed)
    : spec_(attention::Spec::parse(spec_text)), case_(ac), seed_(seed) {
  if (spec_.op == Op::kKvWrite) return;
  std::mt19937_64 rng(seed);
  batch_ = make_attention_batch(spec_, ac, rng);
  input_ = std::make_unique<DeviceAttentionBatch>(spec_, batch_);
  want_.resize(size_t(batch_.tokens) * spec_.heads * spec_.dim);
  cpu::AttentionShape shape{spec_.heads, spec_.causal, spec_.window, batch_.sm_scale};
  cpu::attention(want_.data(), batch_.q.data(), batch_.cache.view(spec_), batch_.table.data(), batch_.max_pages,
                 batch_.seq_lens.data(), batch_.cu_q.data(), batch_.batch, shape);
}

CheckResult AttentionCheck::run(const std::string& config_text, const LoadedKernel& kernel) {
  const attention::Spec& s = spec_;
  const attention::Config cfg = attention::Config::parse(s, config_text);
  if (s.op == Op::kKvWrite) return check_kv_write(s, cfg, kernel, case_, seed_);
  const AttentionBatch& b = batch_;
  const int batch = b.batch, tokens = b.tokens;

  const size_t out_elems = size_t(tokens + kGuardTokens) * s.heads * s.dim;
  DeviceBuffer d_out(out_elems * 2);
  const int64_t wf = attention::workspace_floats(s, cfg, batch), wc = attention::workspace_counters(s, cfg, batch);
  DeviceBuffer d_part(size_t(std::max<int64_t>(wf, 1)) * 4), d_count(size_t(std::max<int64_t>(wc, 1)) * 4);
  d_part.fill_bytes(kPoisonByte);
  d_count.fill_bytes(0);
  Driver& d = *Driver::find();
  std::vector<uint16_t> got(out_elems, 0);
  // Split kernels run twice: the second run needs the counters the first one left at zero.
  for (int run = 0; run < (cfg.split > 1 ? 2 : 1); ++run) {
    d_out.fill_bytes(kPoisonByte);
    launch_attention(kernel, s, cfg, b, *input_, d_out.ptr(), wf ? d_part.ptr() : 0, wc ? d_count.ptr() : 0);
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + s.to_string() + " [" + cfg.to_string() + "]");
  }
  d_out.download(got.data(), got.size() * 2);
  const std::vector<uint16_t>& want = want_;

  CheckResult r;
  r.rows = s.op == Op::kPrefill ? tokens : batch;
  r.seed = seed_;
  r.tolerance = kRowTolerance;
  r.metric = "max over (token, head) rows of |gpu-ref|_2 / max(|ref|_2, 1e-2)";
  const int64_t rows = int64_t(tokens) * s.heads;
  for (int64_t row = 0; row < rows; ++row) {
    double diff = 0, norm = 0;
    bool nan = false;
    for (int e = 0; e < s.dim; ++e) {
      const double g = cpu::half_to_float(got[size_t(row * s.dim + e)]);
      const double w = cpu::half_to_float(want[size_t(row * s.dim + e)]);
      nan |= !std::isfinite(g);
      diff += (g - w) * (g - w), norm += w * w;
    }
    double err = nan ? INFINITY : std::sqrt(diff) / std::max(std::sqrt(norm), kRowFloor);
    if (norm == 0 && diff != 0) err = INFINITY;  // a row that sees no key must be zero
    if (err > r.error || std::isnan(err)) {
      r.error = err;
      if (err > r.tolerance && r.detail.empty()) {
        r.detail = "token " + std::to_string(row / s.heads) + " head " + std::to_string(row % s.heads) +
                   (nan ? ": not finite (never written?)" : ": row error " + std::to_string(err));
      }
    }
  }
  for (size_t i = want.size(); i < got.size() && r.detail.empty(); ++i) {
    if (got[i] != 0xffff) r.detail = "wrote past the last token (element " + std::to_string(i) + ")";
  }
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

CheckResult check_attention_case(const std::string& spec, const std::string& config, const LoadedKernel& kernel,
                                 const AttentionCase& ac, uint64_t seed) {
  return AttentionCheck(spec, ac, seed).run(config, kernel);
}

CheckResult check_attention(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t m,
                            uint64_t seed) {
  return check_attention_case(spec, config, kernel, attention_case_for(spec, m, seed), seed);
}

}  // namespace onecat
