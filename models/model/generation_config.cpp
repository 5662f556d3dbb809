#include "models/model/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/error.h"

namespace onecat::model {
namespace {

std::optional<std::vector<int32_t>> ids_in(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error&) {
    throw InputError(file.string() + " is not valid JSON.");
  }
  if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return std::nullopt;
  const nlohmann::json& v = j["eos_token_id"];
  std::vector<int32_t> ids;
  auto take = [&](const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      throw InputError(file.string() + ": field \"eos_token_id\" must be a token id or a list of them.");
    }
    ids.push_back(int32_t(id.get<int64_t>()));
  };
  if (v.is_array()) {
    for (const auto& id : v) take(id);
  } else {
    take(v);
  }
  return ids;
}

}  // namespace

std::vector<int32_t> eos_token_ids(const std::string& directory) {
  const std::filesystem::path dir(directory);
  if (auto ids = ids_in(dir / "generation_config.json")) return *ids;
  if (auto ids = ids_in(dir / "config.json")) return *ids;
  return {};
}

}  // namespace onecat::model
