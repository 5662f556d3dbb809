#include "runtime/cpu/rope.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "base/half.h"
#include "base/error.h"

namespace onecat::cpu {
namespace {

// base^(2i/dim) as torch evaluates `base ** (arange(0, dim, 2).float() / dim)`: the exponent is
// an fp32 quotient and the power is rounded to fp32 (torch casts the Python base to fp32 too).
float rope_power(double theta, int i, int dim) {
  const float exponent = float(2 * i) / float(dim);
  return float(std::pow(double(float(theta)), double(exponent)));
}

// transformers' get_mscale: the YaRN attention temperature for a context stretched `scale` times.
double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The rotary dimension index whose wavelength makes `rotations` turns over `context` positions.
double yarn_correction_dim(double rotations, int dim, double theta, double context) {
  return dim * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

// A double to fp16 with one rounding: round to fp32 to odd (an inexact result keeps its sticky
// bit in the last place), after which fp32 → fp16 rounds to nearest even exactly as a direct
// conversion would (fp32 has 13 more mantissa bits than fp16).
uint16_t double_to_half(double d) {
  float f = float(d);
  if (double(f) != d && !std::isinf(f)) {
    const float other = std::nextafter(f, double(f) < d ? INFINITY : -INFINITY);
    if (!(std::bit_cast<uint32_t>(f) & 1u)) f = other;
  }
  return float_to_half(f);
}

void require(bool ok, const std::string& sentence) {
  if (!ok) throw InputError(sentence);
}

}  // namespace

RopeTable rope_table(const RopeParams& p, int dim) {
  using Scaling = RopeParams::Scaling;
  require(dim > 0 && dim % 2 == 0, "rope needs an even head dim, got " + std::to_string(dim) + ".");
  require(p.theta > 0 && std::isfinite(p.theta), "rope theta must be a positive number.");
  if (p.scaling != Scaling::kNone) {
    require(p.factor > 0 && std::isfinite(p.factor), "rope scaling needs a positive factor.");
  }
  const int half = dim / 2;
  RopeTable table;
  table.inv_freq.resize(size_t(half));
  for (int i = 0; i < half; ++i) table.inv_freq[size_t(i)] = 1.f / rope_power(p.theta, i, dim);

  switch (p.scaling) {
    case Scaling::kNone:
      break;
    case Scaling::kLinear:
      for (float& f : table.inv_freq) f /= float(p.factor);
      break;
    case Scaling::kLlama3: {
      require(p.original_max_position > 0, "llama3 rope scaling needs original_max_position_embeddings.");
      require(p.high_freq_factor != p.low_freq_factor,
              "llama3 rope scaling needs high_freq_factor different from low_freq_factor.");
      const double old_context = double(p.original_max_position);
      // Wavelengths beyond the original context are interpolated (divided by factor), those
      // shorter than old_context / high_freq_factor kept, and the band between blended.
      const float low_freq_wavelen = float(old_context / p.low_freq_factor);
      const float high_freq_wavelen = float(old_context / p.high_freq_factor);
      const float factor = float(p.factor);
      for (float& f : table.inv_freq) {
        // torch evaluates `scalar / tensor` as reciprocal(tensor) * scalar, in fp32.
        const float wavelen = (1.f / f) * float(2 * std::numbers::pi);
        const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
        const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
        if (medium) {
          const float smooth = ((1.f / wavelen) * float(old_context) - float(p.low_freq_factor)) /
                               float(p.high_freq_factor - p.low_freq_factor);
          const float interpolated = (1.f - smooth) * scaled / factor;
          const float kept = smooth * scaled;
          f = interpolated + kept;
        } else {
          f = scaled;
        }
      }
      break;
    }
    case Scaling::kYarn: {
      require(p.original_max_position > 0, "yarn rope scaling needs original_max_position_embeddings.");
      require(p.theta > 1, "yarn rope scaling needs theta above 1.");
      const double factor = p.factor;
      double attention = p.attention_factor;
      if (attention <= 0) {
        attention = p.mscale != 0 && p.mscale_all_dim != 0
                        ? yarn_mscale(factor, p.mscale) / yarn_mscale(factor, p.mscale_all_dim)
                        : yarn_mscale(factor, 1);
      }
      table.attention_factor = float(attention);
      const double beta_fast = p.beta_fast != 0 ? p.beta_fast : 32;  // transformers: `or 32`
      const double beta_slow = p.beta_slow != 0 ? p.beta_slow : 1;
      const double context = double(p.original_max_position);
      double low = yarn_correction_dim(beta_fast, dim, p.theta, context);
      double high = yarn_correction_dim(beta_slow, dim, p.theta, context);
      if (p.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, double(dim - 1));
      if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
      // Below `low` the frequency is kept (extrapolated), above `high` divided by factor
      // (interpolated), with a linear ramp between.
      for (int i = 0; i < half; ++i) {
        const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.f, 1.f);
        const float extrapolation = 1.f - ramp;
        const float power = rope_power(p.theta, i, dim);
        const float inv_extrapolated = 1.f / power;
        const float inv_interpolated = 1.f / (float(factor) * power);
        const float a = inv_interpolated * (1.f - extrapolation);
        const float b = inv_extrapolated * extrapolation;
        table.inv_freq[size_t(i)] = a + b;
      }
      break;
    }
  }
  return table;
}

void rope_head(const uint16_t* x, int position, int dim, const RopeTable& table, const uint16_t* norm, float eps,
               uint16_t* out) {
  const int half = dim / 2;
  std::vector<float> v(static_cast<size_t>(dim));
  for (int d = 0; d < dim; ++d) v[size_t(d)] = half_to_float(x[d]);
  if (norm) {
    // Qwen3RMSNorm: normalise in fp32, cast to fp16, then multiply by the fp16 weight (an fp16
    // product, rounded once: 11 × 11 mantissa bits are exact in fp32).
    double sum_sq = 0;
    for (float e : v) sum_sq += double(e) * e;
    const float variance = float(sum_sq / dim);
    const float inv_rms = float(1.0 / std::sqrt(double(variance + eps)));
    for (int d = 0; d < dim; ++d) {
      const float normed = half_to_float(float_to_half(v[size_t(d)] * inv_rms));
      v[size_t(d)] = half_to_float(float_to_half(normed * half_to_float(norm[d])));
    }
  }
  for (int i = 0; i < half; ++i) {
    const float angle = float(position) * table.inv_freq[size_t(i)];
    const float c = float(std::cos(double(angle))) * table.attention_factor;
    const float s = float(std::sin(double(angle))) * table.attention_factor;
    // Products of an fp16-valued and an fp32 number are exact in double; one rounding to fp16.
    const double lo = double(v[size_t(i)]), hi = double(v[size_t(i + half)]);
    out[i] = double_to_half(lo * c - hi * s);
    out[i + half] = double_to_half(hi * c + lo * s);
  }
}

void rope_qkv(const uint16_t* qkv, const int* positions, int64_t tokens, int heads, int kv_heads, int dim,
              const RopeTable& table, const uint16_t* q_norm, const uint16_t* k_norm, float eps, uint16_t* q,
              uint16_t* k, uint16_t* v) {
  if (dim <= 0 || dim % 2 != 0 || table.inv_freq.size() != size_t(dim / 2) || heads <= 0 || kv_heads <= 0) {
    throw Error("rope reference: needs an even dim, a table of dim/2 frequencies and at least one head of each kind");
  }
  const int64_t stride = int64_t(heads + 2 * kv_heads) * dim;
  for (int64_t t = 0; t < tokens; ++t) {
    const uint16_t* row = qkv + t * stride;
    for (int h = 0; h < heads; ++h) {
      rope_head(row + int64_t(h) * dim, positions[t], dim, table, q_norm, eps, q + (t * heads + h) * dim);
    }
    for (int h = 0; h < kv_heads; ++h) {
      rope_head(row + int64_t(heads + h) * dim, positions[t], dim, table, k_norm, eps, k + (t * kv_heads + h) * dim);
      std::memcpy(v + (t * kv_heads + h) * dim, row + int64_t(heads + kv_heads + h) * dim,
                  size_t(dim) * sizeof(uint16_t));
    }
  }
}

}  // namespace onecat::cpu
