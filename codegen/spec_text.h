// The canonical text form shared by every family's Spec and Config:
//   spec   = family ":" fields        e.g. rmsnorm:hidden=4096,dtype=f16,residual=1
//   config = fields                   e.g. row_threads=128,vec=8,rows=1
//   fields = key "=" value ("," key "=" value)*
// Families read fields through FieldReader, which rejects unknown, repeated, missing and
// malformed fields with a message naming the field and the accepted values.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace onecat {

struct SpecText {
  std::string family;
  std::string fields;  // everything after ':'
};

SpecText split_spec(std::string_view text);  // throws InputError

class FieldReader {
 public:
  // what: "spec 'rmsnorm:…'" or "config '…'", used in messages.
  FieldReader(std::string_view fields, std::string what);

  int64_t integer(const std::string& key, int64_t min, int64_t max);
  bool flag(const std::string& key);  // 0 or 1
  std::string choice(const std::string& key, const std::vector<std::string>& allowed);
  bool has(const std::string& key) const { return fields_.count(key) != 0; }
  // Optional fields: the default when absent, otherwise read as above.
  int64_t integer_or(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
    return has(key) ? integer(key, min, max) : fallback;
  }
  std::string choice_or(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed) {
    return has(key) ? choice(key, allowed) : fallback;
  }
  // Throws if a field was given that no reader asked for.
  void finish() const;

 private:
  const std::string& take(const std::string& key);
  std::map<std::string, std::string> fields_;
  std::map<std::string, bool> used_;
  std::string what_;
};

// Joins ordered key/value pairs into "k=v,k=v".
std::string join_fields(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace onecat
