#include "models/checkpoint/tensor_values.h"

#include <algorithm>
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

void read_f16_into(const Tensor& t, uint8_t* out) {
  expect_dtype(t, {Dtype::kF16, Dtype::kBF16, Dtype::kF32});
  const size_t n = size_t(t.elements());
  if (t.dtype == Dtype::kF16) {
    // Block by block, each checked while it is in cache: the checkpoint is read once, and the
    // check is a branch-free OR the compiler vectorises (a branch per element was not).
    constexpr size_t kBlock = 16384;
    const uint8_t* in = t.bytes.data();
    auto at = [in](size_t i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      return h;
    };
    for (size_t b = 0; b < n; b += kBlock) {
      const size_t m = std::min(kBlock, n - b);
      std::memcpy(out + 2 * b, in + 2 * b, m * 2);
      bool any = false;
      for (size_t i = b; i < b + m; ++i) any |= (at(i) & 0x7C00) == 0x7C00;
      if (!any) continue;
      for (size_t i = b; i < b + m; ++i) {
        if ((at(i) & 0x7C00) == 0x7C00) bad_value(t, i, cpu::half_to_float(at(i)), "not a finite number");
      }
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float v = t.dtype == Dtype::kBF16 ? bf16_to_float(element<uint16_t>(t, i)) : element<float>(t, i);
    if (!std::isfinite(v)) bad_value(t, i, v, "not a finite number");
    const uint16_t h = cpu::float_to_half(v);
    if ((h & 0x7FFF) == 0x7C00) bad_value(t, i, v, "beyond fp16's range (±65504), which Volta computes in");
    std::memcpy(out + 2 * i, &h, 2);
  }
}

std::vector<uint16_t> read_f16(const Tensor& t) {
  std::vector<uint16_t> out(size_t(t.elements()));
  read_f16_into(t, reinterpret_cast<uint8_t*>(out.data()));
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
