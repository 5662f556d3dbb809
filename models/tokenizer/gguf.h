// The metadata of a GGUF file (its key/value header; tensors are not read).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace onecat::tokenizer {

struct GgufValue {
  enum class Kind { Integer, Float, Bool, String, Array } kind = Kind::Integer;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  // Arrays keep their elements by kind: strings, integers (incl. bools) or floats.
  std::vector<std::string> strings;
  std::vector<int64_t> integers;
  std::vector<double> reals;
};

class GgufMetadata {
 public:
  // InputError when the file is missing, is not GGUF (v2 or v3) or is truncated.
  static GgufMetadata read(const std::filesystem::path& file);

  const GgufValue* find(const std::string& key) const;
  std::optional<std::string> string(const std::string& key) const;
  std::optional<int64_t> integer(const std::string& key) const;
  std::optional<bool> boolean(const std::string& key) const;

 private:
  std::map<std::string, GgufValue> values_;
};

}  // namespace onecat::tokenizer
