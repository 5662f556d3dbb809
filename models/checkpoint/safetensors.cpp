#include "models/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace onecat::models {
namespace {

using nlohmann::json;

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {Dtype::kBool, "BOOL", 1},      {Dtype::kU8, "U8", 1},          {Dtype::kI8, "I8", 1},
    {Dtype::kF8E4M3, "F8_E4M3", 1}, {Dtype::kF8E5M2, "F8_E5M2", 1}, {Dtype::kF8E8M0, "F8_E8M0", 1},
    {Dtype::kI16, "I16", 2},        {Dtype::kU16, "U16", 2},        {Dtype::kF16, "F16", 2},
    {Dtype::kBF16, "BF16", 2},      {Dtype::kI32, "I32", 4},        {Dtype::kU32, "U32", 4},
    {Dtype::kF32, "F32", 4},        {Dtype::kI64, "I64", 8},        {Dtype::kU64, "U64", 8},
    {Dtype::kF64, "F64", 8},
};

const DtypeInfo& info(Dtype d) {
  for (const auto& i : kDtypes) {
    if (i.dtype == d) return i;
  }
  return kDtypes[0];
}

// The safetensors format caps the header at 100 MB; a larger length is a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

std::string_view dtype_name(Dtype dtype) { return info(dtype).name; }
size_t dtype_size(Dtype dtype) { return info(dtype).size; }

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Tensor::shape_text() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError("cannot open " + path_ + " (" + std::strerror(errno) + "); check that it exists and is readable.");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path_ + " is not a regular file; pass the checkpoint's .safetensors files.");
  }
  size_ = size_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw InputError(path_ + " has " + std::to_string(size_) +
                     " bytes, too few for a safetensors header; the file is truncated.");
  }
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw InputError("cannot map " + path_ + " (" + std::strerror(errno) + ").");
  data_ = static_cast<const uint8_t*>(map);
  // Tensors are read front to back: ask the kernel to read ahead (a hint; failure is harmless).
  ::madvise(map, size_, MADV_SEQUENTIAL);
  ::madvise(map, size_, MADV_WILLNEED);
  try {
    uint64_t header_len = 0;
    for (int b = 0; b < 8; ++b) header_len |= uint64_t(data_[b]) << (8 * b);
    if (header_len > kMaxHeaderBytes || header_len > size_ - 8) {
      throw InputError(path_ + ": the header claims " + std::to_string(header_len) + " bytes but the file has " +
                       std::to_string(size_ - 8) +
                       " after the length field; the file is truncated or not safetensors.");
    }
    json header;
    try {
      header = json::parse(data_ + 8, data_ + 8 + header_len);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
      throw InputError(path_ + ": the header is not valid JSON (" + e.what() + ").");
    }
    if (!header.is_object()) throw InputError(path_ + ": the header must be a JSON object.");
    const uint8_t* area = data_ + 8 + header_len;
    const uint64_t area_bytes = size_ - 8 - header_len;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) with the tensor's name below
    std::vector<const std::string*> range_names;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) throw InputError(path_ + ": \"__metadata__\" must be an object.");
        continue;
      }
      const std::string where = path_ + ": tensor " + name;
      if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
          !entry.contains("data_offsets")) {
        throw InputError(where + " needs \"dtype\", \"shape\" and \"data_offsets\" in the header.");
      }
      Tensor t;
      t.name = name;
      t.file = &path_;
      const json& dtype = entry["dtype"];
      const DtypeInfo* found = nullptr;
      if (dtype.is_string()) {
        for (const auto& i : kDtypes) {
          if (i.name == dtype.get<std::string>()) found = &i;
        }
      }
      if (!found) throw InputError(where + " has dtype " + dtype.dump() + ", which onecat does not know.");
      t.dtype = found->dtype;
      const json& shape = entry["shape"];
      if (!shape.is_array()) throw InputError(where + " has a shape that is not a list of integers.");
      // Elements stay at most 2^60 so that elements × 8 bytes cannot overflow (2^61 F64
      // elements would wrap to 0 bytes and match data_offsets [0, 0]).
      constexpr uint64_t kMaxElements = uint64_t(1) << 60;
      uint64_t elements = 1;
      for (const json& d : shape) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxElements) {
          throw InputError(where + " has shape " + shape.dump() + "; dimensions must be non-negative integers.");
        }
        const uint64_t v = d.get<uint64_t>();
        if (v != 0 && elements > kMaxElements / v)
          throw InputError(where + " has shape " + shape.dump() + ", too large.");
        elements *= v;
        t.shape.push_back(int64_t(v));
      }
      const json& off = entry["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
        throw InputError(where + " has data_offsets " + off.dump() + "; they must be two non-negative integers.");
      }
      const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
      if (begin > end || end > area_bytes) {
        throw InputError(where + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                         "] outside the data area of " + std::to_string(area_bytes) +
                         " bytes; the file is truncated or its header is wrong.");
      }
      if (end - begin != elements * found->size) {
        throw InputError(where + " (" + std::string(found->name) + " " + t.shape_text() + ") needs " +
                         std::to_string(elements * found->size) + " bytes but its data_offsets span " +
                         std::to_string(end - begin) + "; the header is wrong.");
      }
      t.bytes = std::span<const uint8_t>(area + begin, size_t(end - begin));
      auto [it, inserted] = tensors_.emplace(name, std::move(t));
      ranges.emplace_back(begin, end);
      range_names.push_back(&it->first);
    }
    std::vector<size_t> order(ranges.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
    for (size_t i = 1; i < order.size(); ++i) {
      const auto& prev = ranges[order[i - 1]];
      const auto& cur = ranges[order[i]];
      if (cur.first < prev.second && cur.first != cur.second) {
        throw InputError(path_ + ": tensor " + *range_names[order[i]] + " overlaps tensor " +
                         *range_names[order[i - 1]] + " in the data area; the header is wrong.");
      }
    }
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

const Tensor* SafetensorsFile::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace onecat::models
