#include "models/checkpoint/tensor_values.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"

namespace onecat::models {
namespace {

std::string where(const Tensor& t) { return (t.file ? *t.file : std::string("checkpoint")) + ": tensor " + t.name; }

float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// safetensors data is little-endian and need not be aligned: read element i by memcpy.
template <class T>
T element(const Tensor& t, size_t i) {
  T v;
  std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

std::string index_text(const Tensor& t, size_t i) {
  std::string s;
  for (size_t d = t.shape.size(); d-- > 0;) {
    const auto dim = size_t(t.shape[d]);
    s = "[" + std::to_string(dim ? i % dim : 0) + "]" + s;
    if (dim) i /= dim;
  }
  return s;
}

std::string number_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}

[[noreturn]] void bad_value(const Tensor& t, size_t i, float v, std::string_view why) {
  throw InputError(where(t) + index_text(t, i) + " is " + number_text(v) + ", " + std::string(why) + ".");
}

}  // namespace

void expect_shape(const Tensor& t, const std::vector<int64_t>& shape, std::string_view why) {
  if (t.shape == shape) return;
  Tensor want;
  want.shape = shape;
  throw InputError(where(t) + " has shape " + t.shape_text() + " but config.json implies " + want.shape_text() + " (" +
                   std::string(why) + "); the weights do not match their config.");
}

void expect_dtype(const Tensor& t, std::initializer_list<Dtype> allowed) {
  std::string list;
  size_t i = 0;
  for (Dtype d : allowed) {
    if (d == t.dtype) return;
    list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + std::string(dtype_name(d));
    ++i;
  }
  throw InputError(where(t) + " has dtype " + std::string(dtype_name(t.dtype)) + " but onecat expects " + list +
                   " here.");
}

std::vector<uint16_t> read_f16(const Tensor& t) {
  expect_dtype(t, {Dtype::kF16, Dtype::kBF16, Dtype::kF32});
  const size_t n = size_t(t.elements());
  std::vector<uint16_t> out(n);
  if (t.dtype == Dtype::kF16) {
    std::memcpy(out.data(), t.bytes.data(), n * 2);
    for (size_t i = 0; i < n; ++i) {
      if ((out[i] & 0x7C00) == 0x7C00) bad_value(t, i, cpu::half_to_float(out[i]), "not a finite number");
    }
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    const float v = t.dtype == Dtype::kBF16 ? bf16_to_float(element<uint16_t>(t, i)) : element<float>(t, i);
    if (!std::isfinite(v)) bad_value(t, i, v, "not a finite number");
    out[i] = cpu::float_to_half(v);
    if ((out[i] & 0x7FFF) == 0x7C00) bad_value(t, i, v, "beyond fp16's range (±65504), which Volta computes in");
  }
  return out;
}

std::vector<float> read_f32(const Tensor& t) {
  expect_dtype(t, {Dtype::kF32, Dtype::kF16, Dtype::kBF16});
  const size_t n = size_t(t.elements());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const float v = t.dtype == Dtype::kF32    ? element<float>(t, i)
                    : t.dtype == Dtype::kBF16 ? bf16_to_float(element<uint16_t>(t, i))
                                              : cpu::half_to_float(element<uint16_t>(t, i));
    if (!std::isfinite(v)) bad_value(t, i, v, "not a finite number");
    out[i] = v;
  }
  return out;
}

std::vector<int32_t> read_i32(const Tensor& t) {
  expect_dtype(t, {Dtype::kI32});
  std::vector<int32_t> out(size_t(t.elements()));
  std::memcpy(out.data(), t.bytes.data(), out.size() * 4);
  return out;
}

std::vector<int> read_ue8m0_exponents(const Tensor& t) {
  expect_dtype(t, {Dtype::kF8E8M0, Dtype::kU8});
  std::vector<int> out(t.bytes.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.bytes[i] == 255) {
      throw InputError(where(t) + index_text(t, i) + " is the UE8M0 NaN byte 255, not a scale.");
    }
    out[i] = int(t.bytes[i]) - 127;
  }
  return out;
}

std::span<const uint8_t> read_u8(const Tensor& t) {
  expect_dtype(t, {Dtype::kU8, Dtype::kI8, Dtype::kF8E4M3, Dtype::kF8E8M0});
  return t.bytes;
}

}  // namespace onecat::models
