#include "codegen/spec_text.h"

#include <cctype>
#include <charconv>

#include "base/error.h"

namespace onecat {
namespace {

bool is_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

SpecText split_spec(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    throw InputError("spec " + quoted_input(text) +
                     " has no family; write it as family:key=value,... (e.g. rmsnorm:hidden=4096,dtype=f16,residual=1)");
  }
  SpecText out{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  if (!is_name(out.family)) {
    throw InputError("spec " + quoted_input(text) + ": " + quoted_input(out.family) + " is not a family name");
  }
  return out;
}

FieldReader::FieldReader(std::string_view fields, std::string what) : what_(std::move(what)) {
  size_t pos = 0;
  while (pos <= fields.size() && !fields.empty()) {
    size_t comma = fields.find(',', pos);
    std::string_view item = fields.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      throw InputError(what_ + ": " + quoted_input(item) + " is not key=value");
    }
    std::string key(item.substr(0, eq));
    if (!is_name(key)) throw InputError(what_ + ": " + quoted_input(key) + " is not a field name");
    if (!fields_.emplace(key, std::string(item.substr(eq + 1))).second) {
      throw InputError(what_ + ": field " + quoted_input(key) + " is given twice");
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
}

const std::string& FieldReader::take(const std::string& key) {
  auto it = fields_.find(key);
  if (it == fields_.end()) throw InputError(what_ + ": missing field '" + key + "'");
  used_[key] = true;
  return it->second;
}

int64_t FieldReader::integer(const std::string& key, int64_t min, int64_t max) {
  const std::string& value = take(key);
  int64_t out = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    throw InputError(what_ + ": " + key + "=" + quoted_input(value) + " is not an integer");
  }
  if (out < min || out > max) {
    throw InputError(what_ + ": " + key + "=" + value + " is out of range [" + std::to_string(min) + ", " +
                     std::to_string(max) + "]");
  }
  return out;
}

bool FieldReader::flag(const std::string& key) { return integer(key, 0, 1) == 1; }

std::string FieldReader::choice(const std::string& key, const std::vector<std::string>& allowed) {
  const std::string& value = take(key);
  for (const auto& a : allowed) {
    if (a == value) return value;
  }
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw InputError(what_ + ": " + key + "=" + quoted_input(value) + " is not one of: " + list);
}

void FieldReader::finish() const {
  for (const auto& [key, value] : fields_) {
    if (!used_.count(key)) throw InputError(what_ + ": unknown field " + quoted_input(key));
  }
}

std::string join_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

}  // namespace onecat
