// One *.safetensors file, memory-mapped: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
// Opening validates the whole header (docs/checkpoint.md, "Validation"), so a Tensor handed out
// always lies inside the file; every problem is an InputError naming the file and the tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace onecat::models {

enum class Dtype {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kF8E8M0,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64
};

std::string_view dtype_name(Dtype dtype);  // as safetensors spells it: "F16", "BF16", "F8_E4M3", …
size_t dtype_size(Dtype dtype);

// A view into a mapped file; valid while its SafetensorsFile lives.
struct Tensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
  const std::string* file = nullptr;  // the path, for messages

  int64_t elements() const;
  std::string shape_text() const;  // "[4096, 128]"
};

class SafetensorsFile {
 public:
  // Throws InputError for a file that cannot be read or whose header is malformed.
  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const Tensor* find(std::string_view name) const;  // nullptr if absent
  const std::map<std::string, Tensor, std::less<>>& tensors() const { return tensors_; }
  size_t file_bytes() const { return size_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, Tensor, std::less<>> tensors_;
};

}  // namespace onecat::models
