#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "codegen/rope/emit.h"
#include "codegen/rope/op.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/rope.h"
#include "tuner/attention_batch.h"
#include "tuner/random_weight.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

using Scaling = cpu::RopeParams::Scaling;

constexpr int64_t kGuardTokens = 2;
constexpr unsigned char kPoisonByte = 0xff;  // fp16 NaN
constexpr float kEps = 1e-6f;
constexpr int kMaxPosition = 131071;  // 128K context
constexpr float kInputRange = 4.f;
constexpr float kNormWeightRange = 2.f;

// The element-wise bound (docs/rope.md). Both sides round once to fp16 from fp32 values that
// differ only by the fp32 evaluation of cos/sin and the products (a few units of 2^-24 of the
// pair's length |(x_i, x_{i+d/2})|·attention_factor, which the rotation keeps: it is the
// length of the output pair): one fp16 ulp plus 2^-20 of the pair's length. With qk_norm the
// GPU's rsqrt and sum order may round a normed input n = fp16(x·r) or n·w to the other
// neighbour of a tie, which moves the output by up to |w|·ulp(n) + ulp(n·w) ≲ 2^-9 of the
// pair's length (kNormFlipShare): allowed for 16 elements plus one in 256. A CPU emulation of
// the kernel's arithmetic (its sum order, rsqrtf and sincospif one fp32 unit off) put 1 to 30
// of 192K–768K elements there; without the norm, none beyond the tight bound.
constexpr double kFp32Share = 0x1p-20;
constexpr double kNormFlipShare = 0x1p-9;
constexpr int64_t kNormFlipsAllowedPer = 256;  // one element in 256, plus kNormFlipsFloor
constexpr int64_t kNormFlipsFloor = 16;

struct Scaled {
  const char* name;
  cpu::RopeParams params;
};

// Each check runs every scaling (the spec does not fix one: the table is data).
std::vector<Scaled> scalings() {
  std::vector<Scaled> out;
  cpu::RopeParams p;
  out.push_back({"default", p});
  p.scaling = Scaling::kLinear, p.factor = 4;
  out.push_back({"linear", p});
  p = {}, p.scaling = Scaling::kLlama3, p.theta = 500000, p.factor = 8, p.original_max_position = 8192;
  out.push_back({"llama3", p});
  p = {}, p.scaling = Scaling::kYarn, p.theta = 1000000, p.factor = 4, p.original_max_position = 32768;
  out.push_back({"yarn", p});
  return out;
}

// Compares q or k (fp16 [rows][dim]) with the reference; counts what the tight bound refuses.
struct Tally {
  double worst = 0;        // max |g − r| / loose bound
  int64_t over_tight = 0;  // elements beyond the tight bound
  int64_t checked = 0;
  std::string detail;
};

void compare_rotated(const uint16_t* got, const uint16_t* want, int64_t rows, int dim, bool norm,
                     const std::string& name, Tally& tally) {
  const int half = dim / 2;
  for (int64_t row = 0; row < rows; ++row) {
    for (int d = 0; d < dim; ++d) {
      const int64_t i = row * dim + d, partner = row * dim + (d < half ? d + half : d - half);
      const double g = cpu::half_to_float(got[i]), r = cpu::half_to_float(want[i]);
      const double pair = std::hypot(r, double(cpu::half_to_float(want[partner])));
      const double tight = half_ulp(std::max(std::fabs(g), std::fabs(r))) + kFp32Share * pair;
      const double loose = tight + (norm ? kNormFlipShare * pair : 0);
      const double diff = std::isfinite(g) ? std::fabs(g - r) : INFINITY;
      ++tally.checked;
      if (diff > tight) ++tally.over_tight;
      if (!(diff / loose <= tally.worst)) {
        tally.worst = diff / loose;
        if (tally.worst > 1 && tally.detail.empty()) {
          tally.detail = name + "[" + std::to_string(row) + "][" + std::to_string(d) + "] = " + std::to_string(g) +
                         ", expected " + std::to_string(r) + (std::isnan(g) ? " (never written?)" : "");
        }
      }
    }
  }
}

// fp8 codes in value order: sign and magnitude → one signed integer (±0 both 0), so that the
// codes of a bracket of values are the integers between the brackets' codes.
int fp8_order(uint8_t c) { return (c & 0x80) ? -(c & 0x7f) : (c & 0x7f); }

// K rotated on both sides differs by compare_rotated's bound before kv_write quantises it; the
// fp8 code of K must then lie between the codes of want − bound and want + bound (one code of
// slack for either bracket's rounding tie). The tight bracket uses the tight bound; a normed
// element whose rsqrt rounds the other way may land in the loose one only (a small element of a
// long pair can move two codes that way), and counts as over_tight like an fp16 flip does.
std::vector<uint16_t> bracket_k(const uint16_t* want, int64_t rows, int dim, bool loose, double sign) {
  const int half = dim / 2;
  std::vector<uint16_t> out(size_t(rows) * dim);
  for (int64_t row = 0; row < rows; ++row) {
    for (int d = 0; d < dim; ++d) {
      const int64_t i = row * dim + d, partner = row * dim + (d < half ? d + half : d - half);
      const double r = cpu::half_to_float(want[i]);
      const double pair = std::hypot(r, double(cpu::half_to_float(want[partner])));
      const double bound = half_ulp(r) + kFp32Share * pair + (loose ? kNormFlipShare * pair : 0);
      out[size_t(i)] = cpu::float_to_half(float(r + sign * bound));
    }
  }
  return out;
}

bool within_codes(uint8_t got, uint8_t lo, uint8_t hi) {
  const int g = fp8_order(got), a = fp8_order(lo), b = fp8_order(hi);
  return g >= std::min(a, b) - 1 && g <= std::max(a, b) + 1;
}

}  // namespace

CheckResult check_rope(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel,
                       int64_t tokens, uint64_t seed) {
  const rope::Spec spec = rope::Spec::parse(spec_text);
  const rope::Config config = rope::Config::parse(spec, config_text);
  const int dim = spec.dim, heads = spec.heads, kvh = spec.kv_heads;
  const int64_t width = int64_t(spec.slots()) * dim;

  std::mt19937_64 rng(seed);
  const std::vector<uint16_t> qkv = random_half(rng, size_t(tokens * width), -kInputRange, kInputRange);
  const std::vector<uint16_t> q_norm = random_half(rng, size_t(dim), -kNormWeightRange, kNormWeightRange);
  const std::vector<uint16_t> k_norm = random_half(rng, size_t(dim), -kNormWeightRange, kNormWeightRange);
  std::vector<int> positions(static_cast<size_t>(tokens));
  std::uniform_int_distribution<int> pos(0, kMaxPosition);
  for (auto& p : positions) p = pos(rng);
  positions[0] = 0;
  if (tokens > 1) positions[1] = kMaxPosition;

  // kv_out=pages: a cache of random content, tokens in distinct shuffled slots, every fifth
  // token padding (slot −1), two spare pages nobody is given.
  attention::Spec cache_spec;
  cache_spec.op = attention::Op::kKvWrite, cache_spec.kv_heads = kvh, cache_spec.dim = dim;
  cache_spec.page = std::max(spec.page, 1), cache_spec.kv = spec.kv, cache_spec.kv_scale = spec.kv_scale;
  HostKvCache cache;
  std::vector<int> slots;
  if (spec.paged) {
    const int64_t pages = (tokens + spec.page - 1) / spec.page + 2;
    cache = random_kv_cache(cache_spec, pages, rng);
    std::vector<int> order(static_cast<size_t>(pages * spec.page));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t t = 0; t < tokens; ++t) slots.push_back(t % 5 == 4 ? -1 : order[size_t(t)]);
  }

  const DeviceBuffer d_qkv = upload_bytes(qkv.data(), qkv.size() * 2);
  const DeviceBuffer d_pos = upload_bytes(positions.data(), positions.size() * 4);
  const DeviceBuffer d_qn = upload_bytes(q_norm.data(), q_norm.size() * 2);
  const DeviceBuffer d_kn = upload_bytes(k_norm.data(), k_norm.size() * 2);
  const DeviceBuffer d_slots = upload_bytes(slots.data(), slots.size() * 4);
  const size_t q_bytes = size_t(tokens + kGuardTokens) * heads * dim * 2;
  const size_t kv_bytes = size_t(tokens + kGuardTokens) * kvh * dim * 2;
  DeviceBuffer d_q(q_bytes), d_k(spec.paged ? 16 : kv_bytes), d_v(spec.paged ? 16 : kv_bytes);
  Driver& drv = *Driver::find();

  CheckResult r;
  r.rows = tokens, r.seed = seed, r.tolerance = 1;
  r.metric = "max |gpu-ref| / (ulp16 + 2^-20·|pair| [+ 2^-9·|pair| for a few normed elements])";
  for (const Scaled& sc : scalings()) {
    const cpu::RopeTable table = cpu::rope_table(sc.params, dim);
    const DeviceBuffer d_freq = upload_bytes(table.inv_freq.data(), table.inv_freq.size() * 4);
    d_q.fill_bytes(kPoisonByte);
    std::optional<DeviceKvCache> d_cache;
    if (spec.paged) {
      d_cache.emplace(cache_spec, cache);
    } else {
      d_k.fill_bytes(kPoisonByte), d_v.fill_bytes(kPoisonByte);
    }
    rope::Args a;
    a.qkv = d_qkv.ptr(), a.positions = d_pos.ptr(), a.inv_freq = d_freq.ptr(),
    a.attention_factor = table.attention_factor;
    a.q_norm = d_qn.ptr(), a.k_norm = d_kn.ptr(), a.eps = kEps, a.q = d_q.ptr();
    a.k = spec.paged ? d_cache->k.ptr() : d_k.ptr(), a.v = spec.paged ? d_cache->v.ptr() : d_v.ptr();
    a.slot_mapping = d_slots.ptr();
    if (spec.paged) a.k_scale = d_cache->k_scale.ptr(), a.v_scale = d_cache->v_scale.ptr();
    a.tokens = tokens;
    a.positions_from_host = true;  // uploaded before the launch
    launch(kernel, rope::make_call(spec, config, a), nullptr);
    drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize", "running " + spec_text + " [" + config_text + "]");

    std::vector<uint16_t> want_q(size_t(tokens) * heads * dim), want_k(size_t(tokens) * kvh * dim),
        want_v(want_k.size());
    cpu::rope_qkv(qkv.data(), positions.data(), tokens, heads, kvh, dim, table, spec.qk_norm ? q_norm.data() : nullptr,
                  spec.qk_norm ? k_norm.data() : nullptr, kEps, want_q.data(), want_k.data(), want_v.data());
    std::vector<uint16_t> got_q(q_bytes / 2);
    d_q.download(got_q.data(), q_bytes);
    Tally tally;
    const std::string at = std::string(" (") + sc.name + " scaling)";
    compare_rotated(got_q.data(), want_q.data(), tokens * heads, dim, spec.qk_norm, "q" + at, tally);
    for (size_t i = want_q.size(); i < got_q.size() && tally.detail.empty(); ++i) {
      if (got_q[i] != 0xffff) tally.detail = "q written past the last token (element " + std::to_string(i) + ")" + at;
    }

    if (!spec.paged) {
      std::vector<uint16_t> got_k(kv_bytes / 2), got_v(kv_bytes / 2);
      d_k.download(got_k.data(), kv_bytes), d_v.download(got_v.data(), kv_bytes);
      compare_rotated(got_k.data(), want_k.data(), tokens * kvh, dim, spec.qk_norm, "k" + at, tally);
      for (size_t i = 0; i < got_v.size() && tally.detail.empty(); ++i) {
        if (i < want_v.size() ? got_v[i] != want_v[i] : got_v[i] != 0xffff || got_k[i] != 0xffff) {
          tally.detail =
              (i < want_v.size() ? "v[" + std::to_string(i) + "] is not the copied value"
                                 : "k or v written past the last token (element " + std::to_string(i) + ")") +
              at;
        }
      }
    } else {
      // The reference cache: rope, then kv_write of its K and V (runtime/cpu/attention).
      HostKvCache ref = cache;
      cpu::kv_write(ref.view(cache_spec), want_k.data(), want_v.data(), slots.data(), tokens);
      std::vector<uint8_t> got_k(ref.k.size()), got_v(ref.v.size());
      d_cache->k.download(got_k.data(), got_k.size()), d_cache->v.download(got_v.data(), got_v.size());
      for (size_t i = 0; i < got_v.size() && tally.detail.empty(); ++i) {
        if (got_v[i] != ref.v[i]) tally.detail = "V cache byte " + std::to_string(i) + " differs from kv_write's" + at;
      }
      if (spec.kv == attention::KvType::kF16) {
        // Rows nobody wrote hold the old values on both sides and pass the element bound exactly.
        compare_rotated(reinterpret_cast<const uint16_t*>(got_k.data()),
                        reinterpret_cast<const uint16_t*>(ref.k.data()), int64_t(ref.k.size() / 2 / size_t(dim)), dim,
                        spec.qk_norm, "K cache" + at, tally);
      } else {
        // Brackets written by the same kv_write; untouched bytes are equal in all of them.
        const int64_t rows = tokens * kvh;
        std::vector<uint8_t> bracket[2][2];  // [tight, loose][low, high]
        for (int loose = 0; loose < 2; ++loose) {
          for (int high = 0; high < 2; ++high) {
            const std::vector<uint16_t> k = bracket_k(want_k.data(), rows, dim, loose && spec.qk_norm, high ? 1 : -1);
            HostKvCache b = cache;
            cpu::kv_write(b.view(cache_spec), k.data(), want_v.data(), slots.data(), tokens);
            bracket[loose][high] = std::move(b.k);
          }
        }
        for (size_t i = 0; i < got_k.size() && tally.detail.empty(); ++i) {
          if (within_codes(got_k[i], bracket[0][0][i], bracket[0][1][i])) continue;
          ++tally.over_tight;
          if (!within_codes(got_k[i], bracket[1][0][i], bracket[1][1][i])) {
            tally.worst = std::max(tally.worst, 2.0);
            tally.detail = "K cache byte " + std::to_string(i) + " is code " + std::to_string(got_k[i]) +
                           ", expected " + std::to_string(ref.k[i]) + " (codes " + std::to_string(bracket[1][0][i]) +
                           ".." + std::to_string(bracket[1][1][i]) + " allowed)" + at;
          }
        }
      }
    }
    const int64_t flips_allowed = spec.qk_norm ? kNormFlipsFloor + tally.checked / kNormFlipsAllowedPer : 0;
    if (tally.detail.empty() && tally.over_tight > flips_allowed) {
      tally.detail = std::to_string(tally.over_tight) + " of " + std::to_string(tally.checked) +
                     " elements beyond one ulp and the fp32 share (" + std::to_string(flips_allowed) + " allowed)" + at;
    }
    r.error = std::max(r.error, tally.worst);
    if (r.detail.empty()) r.detail = tally.detail;
  }
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

}  // namespace onecat
