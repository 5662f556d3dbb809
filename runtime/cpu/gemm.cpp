#include "runtime/cpu/gemm.h"

#include <cmath>
#include <cstring>
#include <string>

#include "base/e2m1.h"
#include "base/e4m3.h"
#include "base/error.h"
#include "base/half.h"
#include "runtime/cpu/parallel.h"

namespace onecat::cpu {
namespace {

using quant::PackedWeight;
using quant::WeightFormat;

// The nibble p of a kernel word that holds k % 8 (docs/gemm.md, "4-bit nibble order").
constexpr int kNibbleOfK[8] = {0, 4, 1, 5, 2, 6, 3, 7};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

uint16_t u16_at(const std::vector<uint8_t>& bytes, int64_t i) {
  return uint16_t(bytes[size_t(2 * i)] | (bytes[size_t(2 * i + 1)] << 8));
}

uint32_t u32_at(const std::vector<uint8_t>& bytes, int64_t i) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= uint32_t(bytes[size_t(4 * i + b)]) << (8 * b);
  return v;
}

float f32_at(const std::vector<uint8_t>& bytes, int64_t i) {
  const uint32_t bits = u32_at(bytes, i);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The 4-bit code of W[n][k] in a [N][K/8] word tensor.
uint32_t code_at(const std::vector<uint8_t>& qweight, int64_t k_total, int64_t n, int64_t k) {
  return (u32_at(qweight, n * (k_total / 8) + k / 8) >> (4 * kNibbleOfK[k % 8])) & 0xF;
}

void expect_size(const PackedWeight& w, const char* tensor, size_t got, int64_t expected) {
  if (int64_t(got) != expected) {
    throw Error(std::string(quant::format_name(w.format)) + " packed weight " + std::to_string(w.n) + "x" +
                std::to_string(w.k) + ": " + tensor + " has " + std::to_string(got) + " entries, expected " +
                std::to_string(expected) + "; it was not built by models/quant/pack");
  }
}

void check_layout(const PackedWeight& w) {
  const int64_t n = w.n, k = w.k;
  if (n <= 0 || k <= 0) throw Error("packed weight has an empty shape");
  const bool int4 = quant::is_int4(w.format);
  if ((int4 || w.format == WeightFormat::kNvfp4 || w.format == WeightFormat::kMxfp4) &&
      (k % 8 != 0 || w.group <= 0 || k % w.group != 0)) {
    throw Error("packed 4-bit weight has K = " + std::to_string(k) + " and group " + std::to_string(w.group));
  }
  switch (w.format) {
    case WeightFormat::kF16:
      expect_size(w, "qweight", w.qweight.size(), 2 * n * k);
      break;
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4:
      expect_size(w, "qweight", w.qweight.size(), n * k / 2);
      expect_size(w, "scales", w.scales.size(), 2 * n * (k / w.group));
      expect_size(w, "zeros", w.zeros.size(), 2 * n * (k / w.group));
      if (!w.perm.empty()) {
        expect_size(w, "perm", w.perm.size(), k);
        for (int32_t src : w.perm) {
          if (src < 0 || src >= k) throw Error("packed gptq4 weight has a perm entry outside [0, K)");
        }
      }
      break;
    case WeightFormat::kFp8B32:
      if (k % 32 != 0) throw Error("packed fp8b32 weight has K = " + std::to_string(k));
      expect_size(w, "qweight", w.qweight.size(), n * k);
      expect_size(w, "scales", w.scales.size(), ceil_div(n, 32) * (k / 32));
      break;
    case WeightFormat::kFp8B128:
      expect_size(w, "qweight", w.qweight.size(), n * k);
      expect_size(w, "scales", w.scales.size(), 4 * (w.group ? ceil_div(n, 128) * ceil_div(k, 128) : n));
      break;
    case WeightFormat::kNvfp4:
      expect_size(w, "qweight", w.qweight.size(), n * k / 2);
      expect_size(w, "scales", w.scales.size(), n * (k / 16));
      break;
    case WeightFormat::kMxfp4:
      expect_size(w, "qweight", w.qweight.size(), n * k / 2);
      expect_size(w, "scales", w.scales.size(), n * (k / 32));
      break;
  }
}

// Row n of W, exactly (every value is a product of at most three floats' worth of bits).
void decode_row(const PackedWeight& w, int64_t n, double* row) {
  const int64_t k_total = w.k;
  switch (w.format) {
    case WeightFormat::kF16:
      for (int64_t k = 0; k < k_total; ++k) row[k] = half_to_float(u16_at(w.qweight, n * k_total + k));
      break;
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4: {
      const int64_t groups = k_total / w.group;
      for (int64_t k = 0; k < k_total; ++k) {
        const int64_t g = n * groups + k / w.group;
        const double scale = half_to_float(u16_at(w.scales, g));
        const double zero = half_to_float(u16_at(w.zeros, g));
        row[k] = (double(code_at(w.qweight, k_total, n, k)) - zero) * scale;
      }
      break;
    }
    case WeightFormat::kFp8B32:
      for (int64_t k = 0; k < k_total; ++k) {
        const int e = int8_t(w.scales[size_t((n / 32) * (k_total / 32) + k / 32)]);
        row[k] = std::ldexp(double(quant::e4m3_to_float(w.qweight[size_t(n * k_total + k)])), e);
      }
      break;
    case WeightFormat::kFp8B128:
      for (int64_t k = 0; k < k_total; ++k) {
        const float scale =
            w.group ? f32_at(w.scales, (n / 128) * ceil_div(k_total, 128) + k / 128) : f32_at(w.scales, n);
        row[k] = double(quant::e4m3_to_float(w.qweight[size_t(n * k_total + k)])) * scale;
      }
      break;
    case WeightFormat::kNvfp4:
      for (int64_t k = 0; k < k_total; ++k) {
        const double scale = quant::e4m3_to_float(w.scales[size_t(n * (k_total / 16) + k / 16)]);
        row[k] = double(quant::e2m1_to_float(uint8_t(code_at(w.qweight, k_total, n, k)))) * scale * w.global_scale;
      }
      break;
    case WeightFormat::kMxfp4:
      for (int64_t k = 0; k < k_total; ++k) {
        const int e = int(w.scales[size_t(n * (k_total / 32) + k / 32)]) - 127;
        row[k] = std::ldexp(double(quant::e2m1_to_float(uint8_t(code_at(w.qweight, k_total, n, k)))), e);
      }
      break;
  }
}

}  // namespace

std::vector<float> dequantize(const PackedWeight& w) {
  check_layout(w);
  std::vector<float> out(size_t(w.n * w.k));
  std::vector<double> row(static_cast<size_t>(w.k));
  for (int64_t n = 0; n < w.n; ++n) {
    decode_row(w, n, row.data());
    for (int64_t k = 0; k < w.k; ++k) out[size_t(n * w.k + k)] = float(row[size_t(k)]);
  }
  return out;
}

void gemm(const PackedWeight& w, const uint16_t* x, int64_t m, const GemmEpilogue& epi, float* y) {
  check_layout(w);
  const int64_t n_total = w.n, k_total = w.k;
  if (epi.kind == GemmEpilogue::kBias && !epi.bias) throw Error("gemm reference: the bias epilogue needs a bias");
  if (epi.kind == GemmEpilogue::kResidual && !epi.residual) {
    throw Error("gemm reference: the residual epilogue needs a residual");
  }
  if (epi.kind == GemmEpilogue::kSiluMul && n_total % 2 != 0) {
    throw Error("gemm reference: the silu-mul epilogue needs an even N (gate|up), got " + std::to_string(n_total));
  }

  // x in the packed column order, as doubles.
  std::vector<double> xs(size_t(m * k_total));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t k = 0; k < k_total; ++k) {
      const int64_t src = w.perm.empty() ? k : w.perm[size_t(k)];
      xs[size_t(i * k_total + k)] = half_to_float(x[i * k_total + src]);
    }
  }
  // Each output column is computed alone, in one order, so splitting the columns over threads
  // changes no bit; small products stay on this thread (starting threads would cost more).
  std::vector<double> acc(size_t(m * n_total));
  auto columns = [&](int64_t begin, int64_t end) {
    std::vector<double> row(static_cast<size_t>(k_total));
    for (int64_t n = begin; n < end; ++n) {
      decode_row(w, n, row.data());
      for (int64_t i = 0; i < m; ++i) {
        const double* xr = &xs[size_t(i * k_total)];
        double sum = 0;
        for (int64_t k = 0; k < k_total; ++k) sum += xr[k] * row[size_t(k)];
        acc[size_t(i * n_total + n)] = sum;
      }
    }
  };
  constexpr double kThreadedWork = 1 << 24;  // multiply-adds
  if (double(m) * double(n_total) * double(k_total) < kThreadedWork) {
    columns(0, n_total);
  } else {
    parallel_chunks(n_total, 16, columns);
  }

  for (int64_t i = 0; i < m; ++i) {
    const double* a = &acc[size_t(i * n_total)];
    switch (epi.kind) {
      case GemmEpilogue::kNone:
        for (int64_t n = 0; n < n_total; ++n) y[i * n_total + n] = float(a[n]);
        break;
      case GemmEpilogue::kBias:
        for (int64_t n = 0; n < n_total; ++n) y[i * n_total + n] = float(a[n] + half_to_float(epi.bias[n]));
        break;
      case GemmEpilogue::kResidual:
        for (int64_t n = 0; n < n_total; ++n) {
          y[i * n_total + n] = float(a[n] + half_to_float(epi.residual[i * n_total + n]));
        }
        break;
      case GemmEpilogue::kSiluMul: {
        const int64_t half_n = n_total / 2;
        for (int64_t j = 0; j < half_n; ++j) {
          const double gate = a[j];
          y[i * half_n + j] = float(gate / (1.0 + std::exp(-gate)) * a[half_n + j]);
        }
        break;
      }
    }
  }
}

}  // namespace onecat::cpu
