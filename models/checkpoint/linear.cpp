#include "models/checkpoint/linear.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "models/checkpoint/tensor_values.h"
#include "models/quant/pack.h"

namespace onecat::models {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_float(Dtype d) { return d == Dtype::kF16 || d == Dtype::kBF16 || d == Dtype::kF32; }

// A packer's InputError ("awq4 weight: …") with the file and layer in front.
template <class Pack>
quant::PackedWeight pack_named(const Tensor& first, const std::string& prefix, Pack pack) {
  try {
    return pack();
  } catch (const InputError& e) {
    throw InputError(*first.file + ": layer " + prefix + ": " + e.what() + ".");
  }
}

std::vector<uint16_t> group_scales(const Tensor& t, int64_t groups, int64_t n, const std::string& why) {
  expect_dtype(t, {Dtype::kF16, Dtype::kBF16});
  expect_shape(t, {groups, n}, why);
  return read_f16(t);
}

quant::PackedWeight load_awq(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k, int g) {
  const std::string why =
      "AWQ group " + std::to_string(g) + " with N = " + std::to_string(n) + ", K = " + std::to_string(k);
  const Tensor& qweight = files.require(prefix + ".qweight");
  const Tensor& qzeros = files.require(prefix + ".qzeros");
  expect_dtype(qweight, {Dtype::kI32});
  expect_shape(qweight, {k, n / 8}, why);
  expect_dtype(qzeros, {Dtype::kI32});
  expect_shape(qzeros, {k / g, n / 8}, why);
  const auto scales = group_scales(files.require(prefix + ".scales"), k / g, n, why);
  const auto qw = read_i32(qweight), qz = read_i32(qzeros);
  return pack_named(qweight, prefix, [&] { return quant::pack_awq4(n, k, g, qw, qz, scales); });
}

quant::PackedWeight load_gptq(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k, int g) {
  const std::string why =
      "GPTQ group " + std::to_string(g) + " with N = " + std::to_string(n) + ", K = " + std::to_string(k);
  const Tensor& qweight = files.require(prefix + ".qweight");
  expect_dtype(qweight, {Dtype::kI32});
  expect_shape(qweight, {k / 8, n}, why);
  std::vector<int32_t> qz, g_idx;
  if (const Tensor* qzeros = files.find(prefix + ".qzeros")) {
    expect_dtype(*qzeros, {Dtype::kI32});
    expect_shape(*qzeros, {k / g, n / 8}, why);
    qz = read_i32(*qzeros);
  }
  if (const Tensor* gi = files.find(prefix + ".g_idx")) {
    expect_dtype(*gi, {Dtype::kI32});
    expect_shape(*gi, {k}, why);
    g_idx = read_i32(*gi);
  }
  const auto scales = group_scales(files.require(prefix + ".scales"), k / g, n, why);
  const auto qw = read_i32(qweight);
  return pack_named(qweight, prefix, [&] { return quant::pack_gptq4(n, k, g, qw, qz, scales, g_idx); });
}

// weight_scale_inv of fp8 block-128 checkpoints as f32 multipliers: float values, or with
// scale_fmt "ue8m0" also the exponent bytes (F8_E8M0, or U8) decoded to 2^e, exact in f32.
std::vector<float> block128_scales(const Tensor& scale, const QuantConfig& quant) {
  if (!quant.ue8m0_scales || (scale.dtype != Dtype::kF8E8M0 && scale.dtype != Dtype::kU8)) return read_f32(scale);
  const std::vector<int> e = read_ue8m0_exponents(scale);
  std::vector<float> out(e.size());
  for (size_t i = 0; i < e.size(); ++i) out[i] = std::ldexp(1.f, e[i]);
  return out;
}

// fp8 block-32 (scale_fmt "ue8m0"): weight_scale_inv [⌈N/32⌉][⌈K/32⌉] as UE8M0 bytes or as
// float powers of two → the exponents fp8b32 keeps, each checked here so that a bad scale names
// the tensor and its element (the packer then refuses K not a multiple of 32).
std::vector<uint8_t> block32_scale_bytes(const Tensor& scale) {
  const int64_t cols = scale.shape.at(1);
  auto refuse = [&](size_t i, const std::string& value) {
    throw InputError(*scale.file + ": tensor " + scale.name + "[" + std::to_string(int64_t(i) / cols) + "][" +
                     std::to_string(int64_t(i) % cols) + "] is " + value + ", but fp8b32 needs scales 2^e with e in [" +
                     std::to_string(quant::kFp8b32MinExponent) + ", " + std::to_string(quant::kFp8b32MaxExponent) +
                     "], where every scaled E4M3 value is exact in fp16.");
  };
  std::vector<int> exponents;
  if (scale.dtype == Dtype::kF8E8M0 || scale.dtype == Dtype::kU8) {
    exponents = read_ue8m0_exponents(scale);
  } else {
    expect_dtype(scale, {Dtype::kF32, Dtype::kBF16, Dtype::kF16, Dtype::kF8E8M0, Dtype::kU8});
    const std::vector<float> values = read_f32(scale);  // NaN and infinity name the element there
    exponents.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      int e = 0;
      if (std::frexp(values[i], &e) != 0.5f) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", double(values[i]));
        refuse(i, std::string(text) + ", not a power of two");
      }
      exponents[i] = e - 1;
    }
  }
  std::vector<uint8_t> bytes(exponents.size());
  for (size_t i = 0; i < exponents.size(); ++i) {
    const int e = exponents[i];
    if (e < quant::kFp8b32MinExponent || e > quant::kFp8b32MaxExponent) refuse(i, "2^" + std::to_string(e));
    bytes[i] = uint8_t(e + 127);
  }
  return bytes;
}

// fp8 blocks (`weight_scale_inv` per 128×128 or 32×32 block) or, for fbgemm_fp8 (block_k 0),
// one `weight_scale` per output row; the config decides, so the plan's gemm specs match the weights.
// compressed-tensors (float-quantized) names every scale `weight_scale`: per block of 128, per
// channel, or one for the tensor, given to every row. W = code · scale in each.
quant::PackedWeight load_fp8(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                             const QuantConfig& quant) {
  const std::string why = "N = " + std::to_string(n) + ", K = " + std::to_string(k);
  const Tensor& weight = files.require(prefix + ".weight");
  expect_dtype(weight, {Dtype::kF8E4M3});
  expect_shape(weight, {n, k}, why);
  const bool per_channel = quant.block_k == 0;
  const Tensor& scale =
      files.require(prefix + (per_channel || quant.compressed_tensors ? ".weight_scale" : ".weight_scale_inv"));
  if (per_channel && quant.compressed_tensors && scale.elements() == 1) {
    const std::vector<float> rows(size_t(n), read_f32(scale)[0]);
    return pack_named(weight, prefix,
                      [&] { return quant::pack_fp8b128(n, k, weight.bytes, rows, quant::Fp8Scales::kPerChannel); });
  }
  if (quant.block_k == 32) {
    expect_shape(scale, {ceil_div(n, 32), ceil_div(k, 32)}, "32×32 blocks over " + why);
    const std::vector<uint8_t> bytes = block32_scale_bytes(scale);
    return pack_named(weight, prefix, [&] { return quant::pack_fp8b32(n, k, weight.bytes, bytes); });
  }
  if (!per_channel) {
    expect_shape(scale, {ceil_div(n, 128), ceil_div(k, 128)}, "128×128 blocks over " + why);
  } else if (scale.shape != std::vector<int64_t>{n}) {
    expect_shape(scale, {n, 1}, "one scale per output row over " + why);
  }
  const auto scales = block128_scales(scale, quant);
  const auto layout = per_channel ? quant::Fp8Scales::kPerChannel : quant::Fp8Scales::kBlock128;
  return pack_named(weight, prefix, [&] { return quant::pack_fp8b128(n, k, weight.bytes, scales, layout); });
}

float scalar_f32(const Tensor& t) {
  if (t.elements() != 1) expect_shape(t, {}, "a per-tensor scale");
  return read_f32(t)[0];
}

// NVFP4: ModelOpt's weight / weight_scale / weight_scale_2, W = code · scale · scale_2; or
// compressed-tensors' (nvfp4-pack-quantized) weight_packed / weight_scale / weight_global_scale,
// the per-tensor scale inverted: W = code · scale / global.
quant::PackedWeight load_nvfp4(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                               const QuantConfig& quant) {
  const std::string why = "NVFP4 with N = " + std::to_string(n) + ", K = " + std::to_string(k);
  const Tensor& weight = files.require(prefix + (quant.compressed_tensors ? ".weight_packed" : ".weight"));
  const Tensor& weight_scale = files.require(prefix + ".weight_scale");
  expect_dtype(weight, {Dtype::kU8});
  expect_shape(weight, {n, k / 2}, why);
  expect_dtype(weight_scale, {Dtype::kF8E4M3});
  expect_shape(weight_scale, {n, k / 16}, why);
  float scale_2;
  if (quant.compressed_tensors) {
    const Tensor& global = files.require(prefix + ".weight_global_scale");
    const float g = scalar_f32(global);
    if (!(g > 0)) {
      throw InputError(*global.file + ": tensor " + global.name + " must be positive, not " + std::to_string(g) + ".");
    }
    scale_2 = 1.f / g;
  } else {
    scale_2 = scalar_f32(files.require(prefix + ".weight_scale_2"));
    // The activation scale is for fp4 activations, which Volta does not have; it is checked, not used.
    if (const Tensor* input_scale = files.find(prefix + ".input_scale")) scalar_f32(*input_scale);
  }
  return pack_named(weight, prefix, [&] { return quant::pack_nvfp4(n, k, weight.bytes, weight_scale.bytes, scale_2); });
}

// MXFP4: gpt-oss's blocks [N][K/32][16] (or [N][K/2]) and scales [N][K/32] UE8M0 bytes, or
// compressed-tensors' (mxfp4-pack-quantized) weight_packed [N][K/2] and weight_scale (U8 or
// F8_E8M0), the same bytes; the low nibble is the even element.
quant::PackedWeight load_mxfp4(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                               const QuantConfig& quant) {
  const std::string why = "MXFP4 with N = " + std::to_string(n) + ", K = " + std::to_string(k);
  const bool ct = quant.compressed_tensors;
  const Tensor& blocks = files.require(prefix + (ct ? ".weight_packed" : ".blocks"));
  const Tensor& scales = files.require(prefix + (ct ? ".weight_scale" : ".scales"));
  expect_dtype(blocks, {Dtype::kU8});
  // gpt-oss writes blocks as [N][K/32][16] bytes; [N][K/2] is the same bytes.
  if (ct) {
    expect_shape(blocks, {n, k / 2}, why);
  } else if (blocks.shape != std::vector<int64_t>{n, k / 2}) {
    expect_shape(blocks, {n, k / 32, 16}, why);
  }
  if (ct) {
    expect_dtype(scales, {Dtype::kU8, Dtype::kF8E8M0});
  } else {
    expect_dtype(scales, {Dtype::kU8});
  }
  expect_shape(scales, {n, k / 32}, why);
  return pack_named(blocks, prefix, [&] { return quant::pack_mxfp4(n, k, blocks.bytes, scales.bytes); });
}

// ---------------------------------------------------------------------------------------------
// compressed-tensors (llm-compressor): the same formats under the library's names and layouts.

// weight_shape, [N, K] as I64 or I32, where the checkpoint has one (pack-quantized writes it).
void expect_weight_shape(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k) {
  const Tensor* t = files.find(prefix + ".weight_shape");
  if (!t) return;
  expect_shape(*t, {2}, "the weight's [out, in] features");
  expect_dtype(*t, {Dtype::kI64, Dtype::kI32});
  int64_t v[2];
  for (int i = 0; i < 2; ++i) {
    if (t->dtype == Dtype::kI64) {
      std::memcpy(&v[i], t->bytes.data() + 8 * i, 8);
    } else {
      int32_t x;
      std::memcpy(&x, t->bytes.data() + 4 * i, 4);
      v[i] = x;
    }
  }
  if (v[0] != n || v[1] != k) {
    throw InputError(*t->file + ": tensor " + t->name + " is [" + std::to_string(v[0]) + ", " + std::to_string(v[1]) +
                     "], but the config gives this layer " + std::to_string(n) + " out × " + std::to_string(k) +
                     " in features.");
  }
}

// W4A16 (pack-quantized, 4-bit int, groups): weight_packed [N][K/8] i32 holds element k of row n
// at bits 4·(k % 8) of word k / 8 as q + 8 (q the signed code in [−8, 7]); weight_scale [N][K/G];
// asymmetric: weight_zero_point [⌈N/8⌉][K/G] i32, packed down the rows the same way (zp + 8);
// act-order: weight_g_idx [K]. W = (q − zp)·scale = (u − (zp + 8))·scale with u the stored
// nibble: a GPTQ weight with zero point zp + 8 (8 when symmetric), its qweight the transpose of
// weight_packed, its scales the transpose of weight_scale.
quant::PackedWeight load_ct_int4(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                                 const QuantConfig& quant) {
  const int g = quant.group_size;
  const std::string why = "compressed-tensors int4, group " + std::to_string(g) + ", with N = " + std::to_string(n) +
                          ", K = " + std::to_string(k);
  const Tensor& packed = files.require(prefix + ".weight_packed");
  expect_dtype(packed, {Dtype::kI32});
  expect_shape(packed, {n, k / 8}, why);
  expect_weight_shape(files, prefix, n, k);
  const Tensor& scale = files.require(prefix + ".weight_scale");
  expect_dtype(scale, {Dtype::kF16, Dtype::kBF16, Dtype::kF32});
  expect_shape(scale, {n, k / g}, why);
  std::vector<int32_t> g_idx;
  if (const Tensor* gi = files.find(prefix + ".weight_g_idx")) {
    expect_shape(*gi, {k}, why);
    g_idx = read_i32(*gi);
  }
  std::vector<int32_t> zp;
  if (!quant.sym) {
    const Tensor& z = files.require(prefix + ".weight_zero_point");
    expect_dtype(z, {Dtype::kI32});
    expect_shape(z, {ceil_div(n, 8), k / g}, why);
    zp = read_i32(z);
  }
  const std::vector<int32_t> words = read_i32(packed);
  const std::vector<uint16_t> s = read_f16(scale);
  const int64_t groups = k / g;
  std::vector<int32_t> qweight(words.size());
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t j = 0; j < k / 8; ++j) qweight[size_t(j * n + row)] = words[size_t(row * (k / 8) + j)];
  }
  std::vector<uint16_t> scales(s.size());
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t gi = 0; gi < groups; ++gi) scales[size_t(gi * n + row)] = s[size_t(row * groups + gi)];
  }
  quant::PackedWeight w =
      pack_named(packed, prefix, [&] { return quant::pack_gptq4(n, k, g, qweight, {}, scales, g_idx); });
  if (!zp.empty()) {  // pack_gptq4 took the symmetric z = 8; the stored zero points replace it
    for (int64_t row = 0; row < n; ++row) {
      for (int64_t gi = 0; gi < groups; ++gi) {
        const uint32_t z = (uint32_t(zp[size_t((row / 8) * groups + gi)]) >> (4 * (row % 8))) & 0xF;
        const uint16_t h = cpu::float_to_half(float(z));
        std::memcpy(w.zeros.data() + size_t(row * groups + gi) * 2, &h, 2);
      }
    }
  }
  return w;
}

// A float weight (F16, BF16, F32) read as fp16 whatever the quantisation (load_linear), else null.
const Tensor* float_weight(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                           const QuantConfig& quant) {
  const Tensor* weight = files.find(prefix + ".weight");
  if (quant.method != QuantConfig::kNone && !(weight && is_float(weight->dtype))) return nullptr;
  const Tensor& w = files.require(prefix + ".weight");
  expect_shape(w, {n, k}, std::to_string(n) + " out × " + std::to_string(k) + " in features");
  return &w;
}

// Float weights of `rows` rows in all, K columns each, read one after another straight into one
// fp16 weight (one allocation, one copy of their bytes); `prefix` names the first in messages.
quant::PackedWeight pack_floats(const std::vector<const Tensor*>& parts, int64_t rows, int64_t k,
                                const std::string& prefix) {
  std::vector<uint8_t> bytes(size_t(rows * k) * 2);
  size_t at = 0;
  for (const Tensor* w : parts) {
    read_f16_into(*w, bytes.data() + at);
    at += size_t(w->elements()) * 2;
  }
  return pack_named(*parts[0], prefix, [&] { return quant::pack_f16_bytes(rows, k, std::move(bytes)); });
}

}  // namespace

quant::PackedWeight load_linear(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                                const QuantConfig& quant) {
  if (const Tensor* w = float_weight(files, prefix, n, k, quant)) return pack_floats({w}, n, k, prefix);
  switch (quant.method) {
    case QuantConfig::kAwq:
      return load_awq(files, prefix, n, k, quant.group_size);
    case QuantConfig::kGptq:
      return quant.compressed_tensors ? load_ct_int4(files, prefix, n, k, quant)
                                      : load_gptq(files, prefix, n, k, quant.group_size);
    case QuantConfig::kFp8Block:
      return load_fp8(files, prefix, n, k, quant);
    case QuantConfig::kNvfp4:
      return load_nvfp4(files, prefix, n, k, quant);
    case QuantConfig::kMxfp4:
      return load_mxfp4(files, prefix, n, k, quant);
    case QuantConfig::kNone:
      break;
  }
  throw InputError(files.directory() + ": layer " + prefix + " has an unknown weight format.");
}

quant::PackedWeight load_stacked(const CheckpointFiles& files, const std::vector<std::string>& prefixes,
                                 const std::vector<int64_t>& rows, int64_t k, const QuantConfig& quant,
                                 const std::string& what) {
  std::vector<const Tensor*> floats;
  int64_t total = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor* w = float_weight(files, prefixes[i], rows.at(i), k, quant);
    if (!w) break;
    floats.push_back(w);
    total += rows[i];
  }
  if (!floats.empty() && floats.size() == prefixes.size()) return pack_floats(floats, total, k, prefixes[0]);
  std::vector<quant::PackedWeight> parts;
  for (size_t i = 0; i < prefixes.size(); ++i) parts.push_back(load_linear(files, prefixes[i], rows.at(i), k, quant));
  return stack_rows(std::move(parts), what);
}

quant::PackedWeight stack_rows(std::vector<quant::PackedWeight> parts, const std::string& what) {
  quant::PackedWeight out = std::move(parts.at(0));
  for (size_t i = 1; i < parts.size(); ++i) {
    quant::PackedWeight& p = parts[i];
    auto refuse = [&](const std::string& why) {
      throw InputError(what + ": its parts cannot be fused into one gemm weight: " + why + ".");
    };
    if (p.format != out.format) {
      refuse("part " + std::to_string(i) + " is " + std::string(quant::format_name(p.format)) + " but part 0 is " +
             std::string(quant::format_name(out.format)) + " (quantise all of them or none)");
    }
    if (p.k != out.k || p.group != out.group) refuse("their in features or groups differ");
    if (p.perm != out.perm) refuse("their GPTQ act-order permutations (g_idx) differ");
    if (p.format == quant::WeightFormat::kNvfp4 && p.global_scale != out.global_scale) {
      refuse("their NVFP4 weight_scale_2 differ (" + std::to_string(out.global_scale) + " and " +
             std::to_string(p.global_scale) + "), and one gemm has one per-tensor scale");
    }
    // Block scales cover 32 or 128 rows; a block straddling two parts would mix their scales.
    const int64_t rows_per_block = p.format == quant::WeightFormat::kFp8B32                    ? 32
                                   : p.format == quant::WeightFormat::kFp8B128 && p.group != 0 ? 128
                                                                                               : 1;
    if (out.n % rows_per_block != 0) {
      refuse("fp8 scale blocks of " + std::to_string(rows_per_block) + " rows would straddle parts at row " +
             std::to_string(out.n));
    }
    out.n += p.n;
    out.qweight.insert(out.qweight.end(), p.qweight.begin(), p.qweight.end());
    out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
    out.zeros.insert(out.zeros.end(), p.zeros.begin(), p.zeros.end());
  }
  return out;
}

}  // namespace onecat::models
