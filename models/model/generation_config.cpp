#include "models/model/generation_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/file.h"

namespace onecat::model {
namespace {

// A JSON file's value (discarded when it does not parse; each caller names that its way), or
// nullopt when the file cannot be opened.
std::optional<nlohmann::json> json_file(const std::filesystem::path& file) {
  const std::optional<std::string> text = try_read_file(file);
  if (!text) return std::nullopt;
  return nlohmann::json::parse(*text, nullptr, false);
}

std::optional<std::vector<int32_t>> ids_in(const std::filesystem::path& file) {
  const std::optional<nlohmann::json> read = json_file(file);
  if (!read) return std::nullopt;
  if (read->is_discarded()) throw InputError(file.string() + " is not valid JSON.");
  const nlohmann::json& j = *read;
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

// One sampling field of `j` (from `where`) into d; `diff`: leave out transformers' defaults.
void take_field(SamplingDefaults& d, const std::string& key, const nlohmann::json& v, const std::string& where,
                bool diff) {
  auto fail = [&](const char* what) {
    throw InputError(where + ": field \"" + key + "\" must be " + what + ", got " + v.dump() + ".");
  };
  auto number = [&](const char* what) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(what);
    return v.get<double>();
  };
  if (v.is_null()) return;
  if (key == "temperature") {
    const double t = number("a number ≥ 0");
    if (t < 0) fail("a number ≥ 0");
    if (!(diff && t == 1.0)) d.temperature = float(t);
  } else if (key == "top_p") {
    const double p = number("a number in (0, 1]");
    if (p <= 0 || p > 1) fail("a number in (0, 1]");
    if (!(diff && p == 1.0)) d.top_p = float(p);
  } else if (key == "min_p") {
    const double p = number("a number in [0, 1]");
    if (p < 0 || p > 1) fail("a number in [0, 1]");
    d.min_p = float(p);
  } else if (key == "repetition_penalty") {
    const double r = number("a number > 0");
    if (r <= 0) fail("a number > 0");
    if (!(diff && r == 1.0)) d.repetition_penalty = float(r);
  } else if (key == "top_k") {
    if (!v.is_number_integer() || v.get<int64_t>() < -1 || v.get<int64_t>() > INT32_MAX) fail("an integer ≥ -1");
    // 0 and −1 both mean "off" (vLLM's −1, transformers' 0).
    const int32_t k = std::max<int32_t>(0, int32_t(v.get<int64_t>()));
    if (!(diff && k == 50)) d.top_k = k;
  } else if (key == "max_new_tokens") {
    if (!v.is_number_integer() || v.get<int64_t>() < 1) fail("an integer ≥ 1");
    d.max_tokens = v.get<int64_t>();
  }
}

constexpr const char* kSamplingFields[] = {"temperature",        "top_k",         "top_p", "min_p",
                                           "repetition_penalty", "max_new_tokens"};

}  // namespace

bool SamplingDefaults::empty() const {
  return !temperature && !top_p && !min_p && !repetition_penalty && !top_k && !max_tokens;
}

std::string SamplingDefaults::describe() const {
  std::string out;
  auto add = [&](const char* name, const std::string& value) {
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + value;
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (temperature) add("temperature", num(*temperature));
  if (top_k) add("top_k", std::to_string(*top_k));
  if (top_p) add("top_p", num(*top_p));
  if (min_p) add("min_p", num(*min_p));
  if (repetition_penalty) add("repetition_penalty", num(*repetition_penalty));
  if (max_tokens) add("max_tokens", std::to_string(*max_tokens));
  return out;
}

SamplingDefaults sampling_defaults(const std::string& directory, const std::string& source) {
  SamplingDefaults d;
  if (source == "vllm") return d;
  const std::filesystem::path file =
      std::filesystem::path(source == "auto" ? directory : source) / "generation_config.json";
  if (source != "auto" && !std::filesystem::is_directory(source)) {
    throw InputError("--generation-config takes auto, vllm or a directory with a generation_config.json; " +
                     quoted_input(source) + " is none of them.");
  }
  const std::optional<nlohmann::json> read = json_file(file);
  if (!read) {
    if (source == "auto") return d;
    throw InputError("--generation-config " + quoted_input(source) + " has no generation_config.json.");
  }
  const nlohmann::json& j = *read;
  if (j.is_discarded() || !j.is_object()) throw InputError(file.string() + " is not a JSON object.");
  for (const char* key : kSamplingFields) {
    if (j.contains(key)) take_field(d, key, j[key], file.string(), true);
  }
  return d;
}

void override_sampling_defaults(SamplingDefaults& d, const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw InputError("--override-generation-config must be a JSON object, e.g. '{\"temperature\": 0.7}'.");
  }
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kSamplingFields), std::end(kSamplingFields), key) == std::end(kSamplingFields)) {
      throw InputError("--override-generation-config: " + quoted_input(key) +
                       " is not one of temperature, top_k, top_p, min_p, repetition_penalty, max_new_tokens.");
    }
    take_field(d, key, value, "--override-generation-config", false);
  }
}

std::vector<int32_t> eos_token_ids(const std::string& directory) {
  const std::filesystem::path dir(directory);
  if (auto ids = ids_in(dir / "generation_config.json")) return *ids;
  if (auto ids = ids_in(dir / "config.json")) return *ids;
  return {};
}

}  // namespace onecat::model
