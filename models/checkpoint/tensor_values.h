// Checked reads of one checkpoint tensor into host vectors. Each check failure is an
// InputError of one sentence naming the file and the tensor and saying what was expected.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "models/checkpoint/safetensors.h"

namespace onecat::models {

// Throws unless t.shape == shape; `why` says where the expectation comes from ("hidden_size 64").
void expect_shape(const Tensor& t, const std::vector<int64_t>& shape, std::string_view why);
void expect_dtype(const Tensor& t, std::initializer_list<Dtype> allowed);

// F16 as is; BF16 and F32 rounded to fp16 (Volta has no bf16). A finite value beyond fp16's
// range (|x| ≥ 65520) and any NaN or infinity are errors naming the tensor and the element.
std::vector<uint16_t> read_f16(const Tensor& t);
// The same into `out`, 2 × elements bytes of little-endian fp16 (a packed weight's own bytes:
// no intermediate copy, whose fresh pages the kernel would zero too).
void read_f16_into(const Tensor& t, uint8_t* out);
std::vector<float> read_f32(const Tensor& t);  // F32, F16 or BF16; non-finite values are errors
std::vector<int32_t> read_i32(const Tensor& t);
std::span<const uint8_t> read_u8(const Tensor& t);  // U8, I8 and the F8 types: the raw bytes
// UE8M0 scales (F8_E8M0, or U8 holding the same bytes): the exponents e = b − 127 of 2^e; the
// NaN byte 255 is an error naming the tensor and the element.
std::vector<int> read_ue8m0_exponents(const Tensor& t);

}  // namespace onecat::models
