#include "models/tokenizer/gguf.h"

#include <cstring>
#include <fstream>

#include "base/error.h"

namespace onecat::tokenizer {

namespace {

enum GgufType : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

class Reader {
 public:
  explicit Reader(const std::filesystem::path& file) : in_(file, std::ios::binary), name_(file.string()) {
    if (!in_) throw InputError(name_ + " cannot be opened.");
  }
  void bytes(void* out, size_t n) {
    if (!in_.read(static_cast<char*>(out), std::streamsize(n)))
      throw InputError(name_ + " ends inside its GGUF metadata; the file is truncated or not GGUF.");
  }
  template <class T>
  T scalar() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  std::string string() {
    uint64_t n = scalar<uint64_t>();
    if (n > (uint64_t(1) << 30))
      throw InputError(name_ + " has a GGUF string of " + std::to_string(n) + " bytes; the file is corrupt.");
    std::string s(n, '\0');
    bytes(s.data(), n);
    return s;
  }
  const std::string& name() const { return name_; }

 private:
  std::ifstream in_;
  std::string name_;
};

size_t scalar_size(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kU64:
    case kI64:
    case kF64:
      return 8;
    default:
      return 0;
  }
}

// One scalar of `type` as an integer or a float.
void read_scalar(Reader& r, uint32_t type, int64_t& integer, double& real, bool& is_real) {
  is_real = false;
  switch (type) {
    case kU8:
      integer = r.scalar<uint8_t>();
      break;
    case kI8:
      integer = r.scalar<int8_t>();
      break;
    case kBool:
      integer = r.scalar<uint8_t>() != 0;
      break;
    case kU16:
      integer = r.scalar<uint16_t>();
      break;
    case kI16:
      integer = r.scalar<int16_t>();
      break;
    case kU32:
      integer = r.scalar<uint32_t>();
      break;
    case kI32:
      integer = r.scalar<int32_t>();
      break;
    case kU64:
      integer = int64_t(r.scalar<uint64_t>());
      break;
    case kI64:
      integer = r.scalar<int64_t>();
      break;
    case kF32:
      real = r.scalar<float>();
      is_real = true;
      break;
    case kF64:
      real = r.scalar<double>();
      is_real = true;
      break;
    default:
      throw InputError(r.name() + " has a GGUF value of unknown type " + std::to_string(type) + ".");
  }
}

GgufValue read_value(Reader& r, uint32_t type) {
  GgufValue v;
  if (type == kString) {
    v.kind = GgufValue::Kind::String;
    v.text = r.string();
  } else if (type == kArray) {
    v.kind = GgufValue::Kind::Array;
    uint32_t element = r.scalar<uint32_t>();
    uint64_t n = r.scalar<uint64_t>();
    if (n > (uint64_t(1) << 28))
      throw InputError(r.name() + " has a GGUF array of " + std::to_string(n) + " elements; the file is corrupt.");
    if (element == kString) {
      v.strings.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.strings.push_back(r.string());
    } else if (element == kArray) {
      throw InputError(r.name() + " has nested GGUF arrays, which onecat does not read.");
    } else {
      if (!scalar_size(element))
        throw InputError(r.name() + " has a GGUF array of unknown type " + std::to_string(element) + ".");
      for (uint64_t i = 0; i < n; ++i) {
        int64_t integer = 0;
        double real = 0;
        bool is_real;
        read_scalar(r, element, integer, real, is_real);
        if (is_real) {
          v.reals.push_back(real);
        } else {
          v.integers.push_back(integer);
        }
      }
    }
  } else {
    bool is_real;
    read_scalar(r, type, v.integer, v.real, is_real);
    v.kind = is_real ? GgufValue::Kind::Float : type == kBool ? GgufValue::Kind::Bool : GgufValue::Kind::Integer;
  }
  return v;
}

}  // namespace

GgufMetadata GgufMetadata::read(const std::filesystem::path& file) {
  Reader r(file);
  char magic[4];
  r.bytes(magic, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) throw InputError(file.string() + " is not a GGUF file.");
  uint32_t version = r.scalar<uint32_t>();
  if (version != 2 && version != 3)
    throw InputError(file.string() + " is GGUF version " + std::to_string(version) +
                     "; onecat reads versions 2 and 3.");
  r.scalar<uint64_t>();  // tensor count
  uint64_t keys = r.scalar<uint64_t>();
  GgufMetadata m;
  for (uint64_t i = 0; i < keys; ++i) {
    std::string key = r.string();
    uint32_t type = r.scalar<uint32_t>();
    m.values_[key] = read_value(r, type);
  }
  return m;
}

const GgufValue* GgufMetadata::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

std::optional<std::string> GgufMetadata::string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || v->kind != GgufValue::Kind::String) return std::nullopt;
  return v->text;
}

std::optional<int64_t> GgufMetadata::integer(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || (v->kind != GgufValue::Kind::Integer && v->kind != GgufValue::Kind::Bool)) return std::nullopt;
  return v->integer;
}

std::optional<bool> GgufMetadata::boolean(const std::string& key) const {
  auto v = integer(key);
  if (!v) return std::nullopt;
  return *v != 0;
}

}  // namespace onecat::tokenizer
