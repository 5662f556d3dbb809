#include "codegen/templates.h"

#include <map>
#include <set>

#include "base/error.h"

namespace onecat {
namespace {

std::vector<std::string> quoted_includes(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = text.find("#include", pos)) != std::string_view::npos) {
    pos += 8;
    size_t open = text.find_first_not_of(" \t", pos);
    if (open == std::string_view::npos || text[open] != '"') continue;
    size_t close = text.find('"', open + 1);
    if (close == std::string_view::npos) break;
    out.emplace_back(text.substr(open + 1, close - open - 1));
    pos = close;
  }
  return out;
}

}  // namespace

std::vector<EmbeddedTemplate> templates_included_by(std::string_view source) {
  std::map<std::string_view, std::string_view> by_name;
  for (const auto& t : embedded_templates()) by_name[t.name] = t.text;

  std::set<std::string> seen;
  std::vector<std::string> pending = quoted_includes(source);
  while (!pending.empty()) {
    std::string name = pending.back();
    pending.pop_back();
    if (!seen.insert(name).second) continue;
    auto it = by_name.find(name);
    if (it == by_name.end()) throw Error("generated source includes \"" + name + "\", which is not an embedded template");
    for (auto& inner : quoted_includes(it->second)) pending.push_back(inner);
  }
  std::vector<EmbeddedTemplate> out;
  for (const auto& name : seen) out.push_back({by_name.find(name)->first, by_name.find(name)->second});
  return out;
}

}  // namespace onecat
