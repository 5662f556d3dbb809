// SHA-256 (FIPS 180-4): the digest behind every cache key.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace onecat {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view text) { return update(text.data(), text.size()); }
  // Length-prefixed field: ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view text);
  Digest finish();

 private:
  void block(const uint8_t* chunk);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

Digest sha256(std::string_view text);
std::string to_hex(const Digest& digest);

}  // namespace onecat
