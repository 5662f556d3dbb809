#include "tuner/verify_attention.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>
#include <random>

#include "codegen/attention/emit.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/half.h"
#include "runtime/cuda/error.h"

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
constexpr float kQueryRange = 3.f;  // scores of a few units: a peaked softmax, not a flat one

DeviceBuffer upload(const void* data, size_t bytes) {
  DeviceBuffer b(std::max<size_t>(bytes, 16));
  if (bytes) b.upload(data, bytes);
  return b;
}

cpu::KvDtype dtype_of(const attention::Spec& s) { return cpu::KvDtype(int(s.kv)); }

std::vector<uint16_t> random_half(std::mt19937_64& rng, size_t n, float range) {
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = cpu::float_to_half(dist(rng));
  return v;
}

struct Cache {
  std::vector<uint8_t> k, v;
  std::vector<float> k_scale, v_scale;
  cpu::PagedKv view(const attention::Spec& s) {
    cpu::PagedKv p;
    p.kv_heads = s.kv_heads, p.dim = s.dim, p.page = s.page, p.dtype = dtype_of(s);
    p.scale_per_head = s.kv_scale == attention::KvScale::kHead;
    p.k = k.data(), p.v = v.data(), p.k_scale = k_scale.data(), p.v_scale = v_scale.data();
    return p;
  }
};

// A cache of `pages` pages: random fp16 values in [-1, 1), or fp8 codes of such values over
// random scales (never NaN or inf codes).
Cache random_cache(const attention::Spec& s, int64_t pages, std::mt19937_64& rng) {
  Cache c;
  const size_t n = size_t(pages) * s.kv_heads * s.page * s.dim;
  const int scales = s.kv_scale == attention::KvScale::kHead ? s.kv_heads : 1;
  std::uniform_real_distribution<float> sd(0.004f, 0.02f);
  for (int i = 0; i < scales; ++i) c.k_scale.push_back(sd(rng)), c.v_scale.push_back(sd(rng));
  if (c.k_scale.empty()) c.k_scale = c.v_scale = {1.f};
  if (s.kv == attention::KvType::kF16) {
    auto k = random_half(rng, n, 1.f), v = random_half(rng, n, 1.f);
    c.k.resize(n * 2), c.v.resize(n * 2);
    std::memcpy(c.k.data(), k.data(), n * 2), std::memcpy(c.v.data(), v.data(), n * 2);
    return c;
  }
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  c.k.resize(n), c.v.resize(n);
  const size_t per_head = size_t(s.page) * s.dim;
  for (size_t i = 0; i < n; ++i) {
    const int h = scales == 1 ? 0 : int(i / per_head % s.kv_heads);
    c.k[i] = cpu::fp8_encode(dist(rng) / c.k_scale[size_t(h)], dtype_of(s));
    c.v[i] = cpu::fp8_encode(dist(rng) / c.v_scale[size_t(h)], dtype_of(s));
  }
  return c;
}

CheckResult check_kv_write(const attention::Spec& s, const attention::Config& cfg, const LoadedKernel& kernel,
                           const AttentionCase& ac, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int tokens = ac.q_lens.at(0);
  const int slots = std::max(ac.seq_lens.at(0), tokens);
  const int64_t pages = (slots + s.page - 1) / s.page + 1;
  Cache cache = random_cache(s, pages, rng);
  // Distinct random slots; every fifth token is padding (slot −1).
  std::vector<int> order(static_cast<size_t>(pages * s.page));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int> slot(static_cast<size_t>(tokens));
  for (int t = 0; t < tokens; ++t) slot[size_t(t)] = t % 5 == 4 ? -1 : order[size_t(t)];
  auto k = random_half(rng, size_t(tokens) * s.kv_heads * s.dim, 4.f), v = random_half(rng, k.size(), 4.f);

  DeviceBuffer dk = upload(cache.k.data(), cache.k.size()), dv = upload(cache.v.data(), cache.v.size());
  DeviceBuffer dks = upload(cache.k_scale.data(), cache.k_scale.size() * 4), dvs = upload(cache.v_scale.data(), cache.v_scale.size() * 4);
  DeviceBuffer dkn = upload(k.data(), k.size() * 2), dvn = upload(v.data(), v.size() * 2), dslot = upload(slot.data(), slot.size() * 4);
  CUdeviceptr kc = dk.ptr(), vc = dv.ptr(), kn = dkn.ptr(), vn = dvn.ptr(), sl = dslot.ptr(), ks = dks.ptr(), vs = dvs.ptr();
  int tok = tokens;
  void* args[] = {&kc, &vc, &kn, &vn, &sl, &ks, &vs, &tok};
  launch(kernel, attention::geometry(s, cfg, tokens), nullptr, args);
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + s.to_string() + " [" + cfg.to_string() + "]");
  std::vector<uint8_t> got_k(cache.k.size()), got_v(cache.v.size());
  dk.download(got_k.data(), got_k.size()), dv.download(got_v.data(), got_v.size());
  cpu::kv_write(cache.view(s), k.data(), v.data(), slot.data(), tokens);

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
    c.seq_lens.push_back(l), c.q_lens.push_back(s.q);
  }
  return c;
}

CheckResult check_attention_case(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel,
                                 const AttentionCase& ac, uint64_t seed) {
  const attention::Spec s = attention::Spec::parse(spec_text);
  const attention::Config cfg = attention::Config::parse(s, config_text);
  if (s.op == Op::kKvWrite) return check_kv_write(s, cfg, kernel, ac, seed);
  std::mt19937_64 rng(seed);
  const int batch = int(ac.seq_lens.size());
  std::vector<int> cu_q(1, 0), seq_lens = ac.seq_lens;
  int max_q = 0, max_pages = 1;
  for (int b = 0; b < batch; ++b) {
    const int q = s.op == Op::kPrefill ? ac.q_lens.at(size_t(b)) : s.q;
    cu_q.push_back(cu_q.back() + q), max_q = std::max(max_q, q);
    max_pages = std::max(max_pages, (seq_lens[size_t(b)] + s.page - 1) / s.page);
  }
  const int tokens = cu_q.back();
  // Pages of all sequences, shuffled, plus spare ones nobody reads.
  const int64_t pages = int64_t(batch) * max_pages + 3;
  std::vector<int> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int> table(size_t(batch) * max_pages);
  for (size_t i = 0; i < table.size(); ++i) table[i] = order[i];
  Cache cache = random_cache(s, pages, rng);
  const auto q = random_half(rng, size_t(tokens) * s.heads * s.dim, kQueryRange);
  const float sm_scale = 1.f / std::sqrt(float(s.dim));

  const size_t out_elems = size_t(tokens + kGuardTokens) * s.heads * s.dim;
  DeviceBuffer d_out(out_elems * 2), d_q = upload(q.data(), q.size() * 2);
  DeviceBuffer dk = upload(cache.k.data(), cache.k.size()), dv = upload(cache.v.data(), cache.v.size());
  DeviceBuffer dks = upload(cache.k_scale.data(), cache.k_scale.size() * 4), dvs = upload(cache.v_scale.data(), cache.v_scale.size() * 4);
  DeviceBuffer dtab = upload(table.data(), table.size() * 4), dlen = upload(seq_lens.data(), seq_lens.size() * 4);
  DeviceBuffer dcu = upload(cu_q.data(), cu_q.size() * 4);
  const int64_t wf = attention::workspace_floats(s, cfg, batch), wc = attention::workspace_counters(s, cfg, batch);
  DeviceBuffer d_part(size_t(std::max<int64_t>(wf, 1)) * 4), d_count(size_t(std::max<int64_t>(wc, 1)) * 4);
  d_part.fill_bytes(kPoisonByte);
  d_count.fill_bytes(0);

  CUdeviceptr out = d_out.ptr(), qp = d_q.ptr(), kc = dk.ptr(), vc = dv.ptr(), tab = dtab.ptr(), lens = dlen.ptr();
  CUdeviceptr ks = s.kv == attention::KvType::kF16 ? 0 : dks.ptr(), vs = s.kv == attention::KvType::kF16 ? 0 : dvs.ptr();
  CUdeviceptr cu = s.op == Op::kPrefill ? dcu.ptr() : 0, part = wf ? d_part.ptr() : 0, count = wc ? d_count.ptr() : 0;
  int mp = max_pages;
  float scale = sm_scale;
  void* args[] = {&out, &qp, &kc, &vc, &ks, &vs, &tab, &mp, &lens, &cu, &scale, &part, &count};
  Driver& d = *Driver::find();
  std::vector<uint16_t> got(out_elems, 0);
  // Split kernels run twice: the second run needs the counters the first one left at zero.
  for (int run = 0; run < (cfg.split > 1 ? 2 : 1); ++run) {
    d_out.fill_bytes(kPoisonByte);
    launch(kernel, attention::geometry(s, cfg, batch, max_q), nullptr, args);
    d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + s.to_string() + " [" + cfg.to_string() + "]");
  }
  d_out.download(got.data(), got.size() * 2);

  std::vector<uint16_t> want(size_t(tokens) * s.heads * s.dim);
  cpu::AttentionShape shape{s.heads, s.causal, s.window, sm_scale};
  cpu::attention(want.data(), q.data(), cache.view(s), table.data(), max_pages, seq_lens.data(), cu_q.data(), batch, shape);

  CheckResult r;
  r.rows = s.op == Op::kPrefill ? tokens : batch;
  r.seed = seed;
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

CheckResult check_attention(const std::string& spec, const std::string& config, const LoadedKernel& kernel, int64_t m,
                            uint64_t seed) {
  return check_attention_case(spec, config, kernel, attention_case_for(spec, m, seed), seed);
}

}  // namespace onecat
