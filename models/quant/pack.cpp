#include "models/quant/pack.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "base/e4m3.h"
#include "base/error.h"
#include "base/half.h"

namespace onecat::quant {
namespace {

// Kernel words hold k = 8w + {0,2,4,6,1,3,5,7}[p] at bits 4p (docs/gemm.md, "4-bit nibble
// order"); this is the inverse: the nibble p that holds k % 8.
constexpr int kNibbleOfK[8] = {0, 4, 1, 5, 2, 6, 3, 7};
// AutoAWQ's order_map (awq/modules/linear/gemm.py): nibble p holds column 8j + map[p].
constexpr int kAwqColumnOfNibble[8] = {0, 2, 4, 6, 1, 3, 5, 7};
// A kernel index is at most 32 bits wide (perm is i32).
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string hex_byte(unsigned b) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[(b >> 4) & 0xF] + digits[b & 0xF];
}

std::string float_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Shape checks of one packing call; every message starts with the format and ends with the
// logical shape, so a reader can match it to the layer.
class Checker {
 public:
  Checker(std::string_view format, int64_t n, int64_t k, int group = 0) : format_(format), n_(n), k_(k), group_(group) {
    if (n <= 0 || k <= 0 || n > kMaxDim || k > kMaxDim) {
      fail("needs 0 < N, K ≤ " + std::to_string(kMaxDim) + "; got " + shape());
    }
  }

  [[noreturn]] void fail(const std::string& what) const { throw InputError(std::string(format_) + " weight: " + what); }

  std::string shape() const {
    std::string s = "N = " + std::to_string(n_) + ", K = " + std::to_string(k_);
    if (group_) s += ", G = " + std::to_string(group_);
    return s;
  }

  void k_multiple_of(int64_t m, std::string_view why) const {
    if (k_ % m != 0)
      fail("K (in features) must be a multiple of " + std::to_string(m) + " (" + std::string(why) + "); got " +
           shape());
  }

  void n_multiple_of(int64_t m, std::string_view why) const {
    if (n_ % m != 0)
      fail("N (out features) must be a multiple of " + std::to_string(m) + " (" + std::string(why) + "); got " +
           shape());
  }

  void group_in(std::initializer_list<int> allowed) const {
    std::string list;
    size_t i = 0;
    for (int g : allowed) {
      if (g == group_) return;
      list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + std::to_string(g);
      ++i;
    }
    fail("group size must be " + list + "; got " + shape());
  }

  // `dims_text` names the dimensions symbolically ("[K/G][N/8]"); `dims` are their values.
  void size(std::string_view tensor, size_t got, std::initializer_list<int64_t> dims,
            std::string_view dims_text) const {
    int64_t expected = 1;
    std::string values;
    for (int64_t d : dims) {
      expected *= d;
      values += "[" + std::to_string(d) + "]";
    }
    if (int64_t(got) != expected) {
      fail("checkpoint tensor " + std::string(tensor) + " has " + std::to_string(got) + " elements; expected " +
           std::string(dims_text) + " = " + values + " (" + std::to_string(expected) + ") for " + shape());
    }
  }

 private:
  std::string_view format_;
  int64_t n_, k_;
  int group_;
};

void put_u16(std::vector<uint8_t>& bytes, size_t index, uint16_t v) {
  bytes[2 * index] = uint8_t(v);
  bytes[2 * index + 1] = uint8_t(v >> 8);
}

std::vector<uint8_t> words_to_bytes(const std::vector<uint32_t>& words) {
  std::vector<uint8_t> bytes(words.size() * 4);
  if constexpr (std::endian::native == std::endian::little) {
    if (!words.empty()) std::memcpy(bytes.data(), words.data(), bytes.size());
    return bytes;
  }
  for (size_t i = 0; i < words.size(); ++i) {
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = uint8_t(words[i] >> (8 * b));
  }
  return bytes;
}

std::vector<uint8_t> floats_to_bytes(std::span<const float> values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = uint8_t(bits >> (8 * b));
  }
  return bytes;
}

// Accumulates 4-bit codes into kernel words [N][K/8].
class NibbleWords {
 public:
  NibbleWords(int64_t n, int64_t k) : words_per_row_(k / 8), words_(size_t(n * (k / 8)), 0u) {}
  void set(int64_t n, int64_t k, uint32_t code) {
    words_[size_t(n * words_per_row_ + k / 8)] |= (code & 0xF) << (4 * kNibbleOfK[k % 8]);
  }
  // A whole word: codes k = 8·word_k … 8·word_k + 7 of column n, already in kernel order.
  void set_word(int64_t n, int64_t word_k, uint32_t word) { words_[size_t(n * words_per_row_ + word_k)] = word; }
  std::vector<uint8_t> bytes() const { return words_to_bytes(words_); }

 private:
  int64_t words_per_row_;
  std::vector<uint32_t> words_;
};

uint32_t nibble(int32_t word, int p) { return (uint32_t(word) >> (4 * p)) & 0xF; }

// The inverse of kNibbleOfK: which k of a word sits at nibble p.
constexpr int kKOfNibble[8] = {0, 2, 4, 6, 1, 3, 5, 7};
static_assert(kNibbleOfK[kKOfNibble[1]] == 1 && kNibbleOfK[kKOfNibble[6]] == 6);

// Transposes the 8×8 matrix of nibbles whose row r is w[r] (column c: nibble c): afterwards
// nibble c of w[r] is what nibble r of w[c] was. Three rounds of block swaps (4×4, 2×2, 1×1).
void transpose_nibbles(uint32_t (&w)[8]) {
  auto swap = [&](int a, int b, int shift, uint32_t mask) {
    const uint32_t t = ((w[a] >> shift) ^ w[b]) & mask;
    w[a] ^= t << shift;
    w[b] ^= t;
  };
  for (int r = 0; r < 4; ++r) swap(r, r + 4, 16, 0x0000FFFFu);
  for (int r : {0, 1, 4, 5}) swap(r, r + 2, 8, 0x00FF00FFu);
  for (int r = 0; r < 8; r += 2) swap(r, r + 1, 4, 0x0F0F0F0Fu);
}

// Checkpoint [K/G][N] fp16 → kernel [N][K/G] fp16.
std::vector<uint8_t> transpose_group_scales(std::span<const uint16_t> scales, int64_t n, int64_t groups) {
  std::vector<uint8_t> out(size_t(n * groups) * 2);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t col = 0; col < n; ++col) put_u16(out, size_t(col * groups + g), scales[size_t(g * n + col)]);
  }
  return out;
}

// FP4 checkpoint bytes [N][K/2] (low nibble = even k) → kernel words [N][K/8].
std::vector<uint8_t> pack_fp4_codes(std::span<const uint8_t> bytes, int64_t n, int64_t k) {
  NibbleWords words(n, k);
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const uint8_t byte = bytes[size_t(row * (k / 2) + kk / 2)];
      words.set(row, kk, (kk % 2) ? byte >> 4 : byte & 0xF);
    }
  }
  return words.bytes();
}

void refuse_e4m3_nan(const Checker& c, std::span<const uint8_t> codes, int64_t row_len, std::string_view tensor) {
  for (size_t i = 0; i < codes.size(); ++i) {
    if (e4m3_is_nan(codes[i])) {
      c.fail(std::string(tensor) + "[" + std::to_string(int64_t(i) / row_len) + "][" +
             std::to_string(int64_t(i) % row_len) + "] is " + hex_byte(codes[i]) +
             ", an E4M3 NaN code; the checkpoint is corrupt or its tensor is not E4M3");
    }
  }
}

std::string fp8b32_block(int64_t rb, int64_t cb, int64_t n, int64_t k) {
  return "block [" + std::to_string(rb) + "][" + std::to_string(cb) + "] (rows " + std::to_string(rb * 32) + ".." +
         std::to_string(std::min(n, rb * 32 + 32) - 1) + ", columns " + std::to_string(cb * 32) + ".." +
         std::to_string(std::min(k, cb * 32 + 32) - 1) + ")";
}

// A PackedWeight with its shape set and no tensors yet.
PackedWeight empty_packed(WeightFormat format, int64_t n, int64_t k, int group) {
  PackedWeight p;
  p.format = format;
  p.n = n;
  p.k = k;
  p.group = group;
  return p;
}

PackedWeight pack_fp8b32_exponents(const Checker& c, int64_t n, int64_t k, std::span<const uint8_t> weight,
                                   std::vector<uint8_t> exponents) {
  refuse_e4m3_nan(c, weight, k, "weight");
  PackedWeight p = empty_packed(WeightFormat::kFp8B32, n, k, 32);
  p.qweight.assign(weight.begin(), weight.end());
  p.scales = std::move(exponents);
  return p;
}

void check_fp8b32_exponent(const Checker& c, int e, int64_t rb, int64_t cb, int64_t n, int64_t k,
                           const std::string& shown) {
  if (e < kFp8b32MinExponent || e > kFp8b32MaxExponent) {
    c.fail("scale of " + fp8b32_block(rb, cb, n, k) + " is " + shown + "; fp8b32 needs scales 2^e with e in [" +
           std::to_string(kFp8b32MinExponent) + ", " + std::to_string(kFp8b32MaxExponent) +
           "], where every scaled E4M3 value is exact in fp16");
  }
}

}  // namespace

PackedWeight pack_f16(int64_t n, int64_t k, std::span<const uint16_t> weight) {
  Checker c("f16", n, k);
  c.size("weight", weight.size(), {n, k}, "[N][K]");
  PackedWeight p = empty_packed(WeightFormat::kF16, n, k, 0);
  // The kernels read little-endian fp16, which is this host's order: one copy.
  static_assert(std::endian::native == std::endian::little);
  p.qweight.resize(weight.size() * 2);
  std::memcpy(p.qweight.data(), weight.data(), weight.size() * 2);
  return p;
}

PackedWeight pack_f16_bytes(int64_t n, int64_t k, std::vector<uint8_t> bytes) {
  Checker c("f16", n, k);
  if (bytes.size() % 2 != 0) throw InputError("f16 weight: an odd number of bytes");
  c.size("weight bytes", bytes.size() / 2, {n, k}, "[N][K] of 2 bytes");
  PackedWeight p = empty_packed(WeightFormat::kF16, n, k, 0);
  p.qweight = std::move(bytes);
  return p;
}

PackedWeight pack_awq4(int64_t n, int64_t k, int group, std::span<const int32_t> qweight,
                       std::span<const int32_t> qzeros, std::span<const uint16_t> scales) {
  Checker c("awq4", n, k, group);
  c.group_in({32, 64, 128});
  c.k_multiple_of(group, "whole groups");
  c.n_multiple_of(8, "AutoAWQ packs 8 columns per i32");
  const int64_t groups = k / group;
  c.size("qweight", qweight.size(), {k, n / 8}, "[K][N/8]");
  c.size("qzeros", qzeros.size(), {groups, n / 8}, "[K/G][N/8]");
  c.size("scales", scales.size(), {groups, n}, "[K/G][N]");

  PackedWeight p = empty_packed(WeightFormat::kAwq4, n, k, group);
  // A transpose ([K][N/8] words → [N][K/8] words), so in tiles: 8 checkpoint words (8 k of 8
  // columns) make 8 kernel words (8 k of one column each), every word written once; element by
  // element through NibbleWords::set, the scattered read-modify-writes ran at 0.1 GB/s a core.
  NibbleWords words(n, k);
  constexpr int64_t kTileWords = 16;  // input words per row of a tile: 128 columns
  for (int64_t j0 = 0; j0 < n / 8; j0 += kTileWords) {
    const int64_t j1 = std::min(n / 8, j0 + kTileWords);
    for (int64_t wk = 0; wk < k / 8; ++wk) {
      for (int64_t j = j0; j < j1; ++j) {
        // Row p of the nibble matrix is the word of k = 8·wk + kKOfNibble[p]: after the
        // transpose, word q holds nibble q of each, at the position the kernel wants that k.
        uint32_t w[8];
        for (int p = 0; p < 8; ++p) w[p] = uint32_t(qweight[size_t((8 * wk + kKOfNibble[p]) * (n / 8) + j)]);
        transpose_nibbles(w);
        for (int q = 0; q < 8; ++q) words.set_word(8 * j + kAwqColumnOfNibble[q], wk, w[q]);
      }
    }
  }
  p.qweight = words.bytes();
  p.scales = transpose_group_scales(scales, n, groups);
  p.zeros.resize(size_t(n * groups) * 2);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t j = 0; j < n / 8; ++j) {
      const int32_t word = qzeros[size_t(g * (n / 8) + j)];
      for (int q = 0; q < 8; ++q) {
        const int64_t col = 8 * j + kAwqColumnOfNibble[q];
        put_u16(p.zeros, size_t(col * groups + g), cpu::float_to_half(float(nibble(word, q))));
      }
    }
  }
  return p;
}

PackedWeight pack_gptq4(int64_t n, int64_t k, int group, std::span<const int32_t> qweight,
                        std::span<const int32_t> qzeros, std::span<const uint16_t> scales,
                        std::span<const int32_t> g_idx) {
  Checker c("gptq4", n, k, group);
  c.group_in({32, 64, 128});
  c.k_multiple_of(group, "whole groups");
  const int64_t groups = k / group;
  c.size("qweight", qweight.size(), {k / 8, n}, "[K/8][N]");
  if (!qzeros.empty()) {
    c.n_multiple_of(8, "AutoGPTQ packs 8 zero points per i32");
    c.size("qzeros", qzeros.size(), {groups, n / 8}, "[K/G][N/8]");
  }
  c.size("scales", scales.size(), {groups, n}, "[K/G][N]");
  if (!g_idx.empty()) c.size("g_idx", g_idx.size(), {k}, "[K]");

  // Act-order: packed column k' is original column perm[k']; `position` is its inverse.
  std::vector<int32_t> perm;
  bool act_order = false;
  for (int64_t kk = 0; kk < int64_t(g_idx.size()); ++kk) {
    const int32_t g = g_idx[size_t(kk)];
    if (g < 0 || g >= groups) {
      c.fail("g_idx[" + std::to_string(kk) + "] = " + std::to_string(g) + " is not a group in [0, " +
             std::to_string(groups) + ") for " + c.shape());
    }
    if (g != kk / group) act_order = true;
  }
  std::vector<int64_t> position(static_cast<size_t>(k));
  for (int64_t kk = 0; kk < k; ++kk) position[size_t(kk)] = kk;
  if (act_order) {
    std::vector<int64_t> members(size_t(groups), 0);
    for (int32_t g : g_idx) ++members[size_t(g)];
    for (int64_t g = 0; g < groups; ++g) {
      if (members[size_t(g)] != group) {
        c.fail("g_idx puts " + std::to_string(members[size_t(g)]) + " columns in group " + std::to_string(g) +
               "; act-order packing needs exactly G per group (" + c.shape() + ")");
      }
    }
    perm.resize(size_t(k));
    for (int64_t kk = 0; kk < k; ++kk) perm[size_t(kk)] = int32_t(kk);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int32_t a, int32_t b) { return g_idx[size_t(a)] < g_idx[size_t(b)]; });
    for (int64_t kp = 0; kp < k; ++kp) position[size_t(perm[size_t(kp)])] = kp;
  }

  PackedWeight p = empty_packed(WeightFormat::kGptq4, n, k, group);
  NibbleWords words(n, k);
  for (int64_t r = 0; r < k / 8; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      const int32_t word = qweight[size_t(r * n + col)];
      if (!act_order) {  // the word's 8 k stay one word: only their nibbles move
        uint32_t out = 0;
        for (int i = 0; i < 8; ++i) out |= nibble(word, i) << (4 * kNibbleOfK[i]);
        words.set_word(col, r, out);
        continue;
      }
      for (int i = 0; i < 8; ++i) words.set(col, position[size_t(8 * r + i)], nibble(word, i));
    }
  }
  p.qweight = words.bytes();
  p.scales = transpose_group_scales(scales, n, groups);
  p.zeros.resize(size_t(n * groups) * 2);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t col = 0; col < n; ++col) {
      // v1 stores z − 1; without qzeros the checkpoint is symmetric, z = 8.
      const uint32_t z = qzeros.empty() ? 8 : nibble(qzeros[size_t(g * (n / 8) + col / 8)], int(col % 8)) + 1;
      put_u16(p.zeros, size_t(col * groups + g), cpu::float_to_half(float(z)));
    }
  }
  p.perm = std::move(perm);
  return p;
}

namespace {

// Both scale encodings of fp8b32: exponent(c, i, rb, cb) reads block i's scale as 2^e and
// says how to show it, refusing (through c) what is not a power of two.
template <class ExponentOf>
PackedWeight pack_fp8b32_blocks(int64_t n, int64_t k, std::span<const uint8_t> weight, size_t scale_count,
                                ExponentOf exponent) {
  Checker c("fp8b32", n, k);
  c.k_multiple_of(32, "whole 32-wide blocks");
  const int64_t row_blocks = ceil_div(n, 32), col_blocks = k / 32;
  c.size("weight", weight.size(), {n, k}, "[N][K]");
  c.size("scales", scale_count, {row_blocks, col_blocks}, "[⌈N/32⌉][K/32]");
  std::vector<uint8_t> exponents(scale_count);
  for (int64_t rb = 0; rb < row_blocks; ++rb) {
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const size_t i = size_t(rb * col_blocks + cb);
      const auto [e, shown] = exponent(c, i, rb, cb);
      check_fp8b32_exponent(c, e, rb, cb, n, k, shown);
      exponents[i] = uint8_t(int8_t(e));
    }
  }
  return pack_fp8b32_exponents(c, n, k, weight, std::move(exponents));
}

}  // namespace

PackedWeight pack_fp8b32(int64_t n, int64_t k, std::span<const uint8_t> weight, std::span<const uint8_t> scales_ue8m0) {
  return pack_fp8b32_blocks(n, k, weight, scales_ue8m0.size(), [&](const Checker&, size_t i, int64_t, int64_t) {
    const uint8_t b = scales_ue8m0[i];
    const int e = int(b) - 127;
    return std::pair{e, b == 255 ? std::string("NaN (UE8M0 byte 255)")
                                 : "2^" + std::to_string(e) + " (UE8M0 byte " + std::to_string(b) + ")"};
  });
}

PackedWeight pack_fp8b32(int64_t n, int64_t k, std::span<const uint8_t> weight, std::span<const float> scales) {
  return pack_fp8b32_blocks(n, k, weight, scales.size(), [&](const Checker& c, size_t i, int64_t rb, int64_t cb) {
    const float s = scales[i];
    int e2 = 0;
    const float mantissa = std::isfinite(s) ? std::frexp(s, &e2) : 0.f;
    if (mantissa != 0.5f) {
      c.fail("scale of " + fp8b32_block(rb, cb, n, k) + " is " + float_text(s) +
             ", not a power of two; fp8b32 decodes exactly only with scales 2^e, so this checkpoint cannot use it");
    }
    const int e = e2 - 1;
    return std::pair{e, float_text(s) + " = 2^" + std::to_string(e)};
  });
}

PackedWeight pack_fp8b128(int64_t n, int64_t k, std::span<const uint8_t> weight,
                          std::span<const float> weight_scale_inv, Fp8Scales layout) {
  Checker c("fp8b128", n, k);
  c.size("weight", weight.size(), {n, k}, "[N][K]");
  if (layout == Fp8Scales::kBlock128) {
    c.size("weight_scale_inv", weight_scale_inv.size(), {ceil_div(n, 128), ceil_div(k, 128)}, "[⌈N/128⌉][⌈K/128⌉]");
  } else {
    c.size("weight_scale_inv", weight_scale_inv.size(), {n}, "[N] (per channel)");
  }
  for (size_t i = 0; i < weight_scale_inv.size(); ++i) {
    if (!std::isfinite(weight_scale_inv[i])) {
      c.fail("weight_scale_inv element " + std::to_string(i) + " is " + float_text(weight_scale_inv[i]) +
             "; scales must be finite");
    }
  }
  refuse_e4m3_nan(c, weight, k, "weight");
  PackedWeight p = empty_packed(WeightFormat::kFp8B128, n, k, layout == Fp8Scales::kBlock128 ? 128 : 0);
  p.qweight.assign(weight.begin(), weight.end());
  p.scales = floats_to_bytes(weight_scale_inv);
  return p;
}

PackedWeight pack_nvfp4(int64_t n, int64_t k, std::span<const uint8_t> weight, std::span<const uint8_t> weight_scale,
                        float weight_scale_2) {
  Checker c("nvfp4", n, k);
  c.k_multiple_of(16, "whole 16-wide blocks");
  c.size("weight", weight.size(), {n, k / 2}, "[N][K/2]");
  c.size("weight_scale", weight_scale.size(), {n, k / 16}, "[N][K/16]");
  if (!std::isfinite(weight_scale_2)) {
    c.fail("weight_scale_2 is " + float_text(weight_scale_2) + "; the per-tensor scale must be finite");
  }
  refuse_e4m3_nan(c, weight_scale, k / 16, "weight_scale");
  PackedWeight p = empty_packed(WeightFormat::kNvfp4, n, k, 16);
  p.qweight = pack_fp4_codes(weight, n, k);
  p.scales.assign(weight_scale.begin(), weight_scale.end());
  p.global_scale = weight_scale_2;
  return p;
}

PackedWeight pack_mxfp4(int64_t n, int64_t k, std::span<const uint8_t> blocks, std::span<const uint8_t> scales) {
  Checker c("mxfp4", n, k);
  c.k_multiple_of(32, "whole 32-wide blocks");
  c.size("blocks", blocks.size(), {n, k / 2}, "[N][K/2]");
  c.size("scales", scales.size(), {n, k / 32}, "[N][K/32]");
  for (size_t i = 0; i < scales.size(); ++i) {
    const std::string where =
        "scales[" + std::to_string(int64_t(i) / (k / 32)) + "][" + std::to_string(int64_t(i) % (k / 32)) + "]";
    if (scales[i] == 255) c.fail(where + " is 255, the UE8M0 NaN code; the checkpoint is corrupt");
    // 6 · 2^(e-127) must fit fp16 (65504): the tensor-core strategies multiply fp16 tiles.
    if (scales[i] > kMxfp4MaxScaleByte) {
      c.fail(where + " is " + std::to_string(scales[i]) + " (a block scale of 2^" +
             std::to_string(int(scales[i]) - 127) + "): its weights reach 6·2^" + std::to_string(int(scales[i]) - 127) +
             ", beyond fp16's 65504; onecat takes UE8M0 scales up to " + std::to_string(kMxfp4MaxScaleByte) +
             " (2^13)");
    }
  }
  PackedWeight p = empty_packed(WeightFormat::kMxfp4, n, k, 32);
  p.qweight = pack_fp4_codes(blocks, n, k);
  p.scales.assign(scales.begin(), scales.end());
  return p;
}

void scale_halves(void* halves, size_t count, double factor, const std::string& what) {
  auto* bytes = static_cast<unsigned char*>(halves);
  for (size_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    const float v = float(double(cpu::half_to_float(h)) * factor);
    if (!(std::fabs(v) < 65520.f)) throw InputError(what + " times " + std::to_string(factor) + " leave fp16's range.");
    h = cpu::float_to_half(v);
    std::memcpy(bytes + 2 * i, &h, 2);
  }
}

void scale_rows(PackedWeight& w, float factor, const std::string& what) {
  switch (w.format) {
    case WeightFormat::kF16:
      scale_halves(w.qweight.data(), w.qweight.size() / 2, factor, what + ": its values");
      return;
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4:
      scale_halves(w.scales.data(), w.scales.size() / 2, factor, what + ": its group scales");
      return;
    case WeightFormat::kFp8B128:
      for (size_t i = 0; i + 3 < w.scales.size(); i += 4) {
        float v;
        std::memcpy(&v, w.scales.data() + i, 4);
        v *= factor;
        std::memcpy(w.scales.data() + i, &v, 4);
      }
      return;
    case WeightFormat::kNvfp4:
      w.global_scale *= factor;
      return;
    default:
      break;
  }
  throw InputError(what + " is " + std::string(format_name(w.format)) +
                   ", whose power-of-two scales cannot take a factor of " + std::to_string(factor) + ".");
}

}  // namespace onecat::quant
