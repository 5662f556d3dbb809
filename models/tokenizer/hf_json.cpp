// Tokenizer from a Hugging Face checkpoint: tokenizer.json, plus tokenizer_config.json and
// generation_config.json for what transformers adds on top (BOS/EOS, the Llama classes'
// add_bos_token/add_eos_token).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "models/tokenizer/definition.h"
#include "models/tokenizer/tokenizer.h"

namespace onecat::tokenizer {

namespace {

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(what + " is not valid JSON (error at byte " + std::to_string(e.byte) + ").");
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number like 1e400
    throw InputError(what + " is not valid JSON (" + e.what() + ").");
  }
}

// A special token in tokenizer_config.json: "<s>" or {"content": "<s>", …}.
std::optional<std::string> token_name(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return std::nullopt;
}

void load_model(const nlohmann::json& model, TokenizerDefinition& d) {
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") throw InputError("The tokenizer model '" + type + "' is not supported by onecat (only BPE is).");
  if (!model.value("dropout", nlohmann::json()).is_null() && model["dropout"].get<double>() != 0.0)
    throw InputError("The tokenizer's BPE dropout is not supported by onecat.");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto v = model.value(key, nlohmann::json());
    if (!v.is_null() && !v.get<std::string>().empty())
      throw InputError(std::string("The tokenizer's BPE option ") + key + " is not supported by onecat.");
  }
  for (const auto& [token, id] : model.at("vocab").items()) d.vocab.add(token, id.get<int32_t>());
  for (const auto& m : model.at("merges")) {
    if (m.is_array()) {
      d.merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
      continue;
    }
    std::string line = m.get<std::string>();
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw InputError("The tokenizer merge '" + line + "' is not two tokens separated by one space.");
    d.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  d.bpe.byte_fallback = model.value("byte_fallback", false);
  d.bpe.fuse_unk = model.value("fuse_unk", false);
  d.bpe.ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string())
    d.bpe.unk_token = model["unk_token"].get<std::string>();
}

// transformers' Llama and Gemma tokenizer classes rebuild the template from these flags.
void apply_bos_eos_flags(const nlohmann::json& config, TokenizerDefinition& d) {
  std::string cls = config.value("tokenizer_class", std::string());
  static const char* kRebuilding[] = {"LlamaTokenizer",         "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                      "CodeLlamaTokenizerFast", "GemmaTokenizer",     "GemmaTokenizerFast"};
  bool rebuilds = false;
  for (const char* c : kRebuilding) rebuilds |= cls == c;
  if (!rebuilds || !(config.contains("add_bos_token") || config.contains("add_eos_token"))) return;
  auto id_of = [&](const char* key) -> std::optional<std::pair<std::string, int32_t>> {
    auto name = token_name(config, key);
    if (!name) return std::nullopt;
    for (const auto& t : d.added_tokens)
      if (t.content == *name) return std::make_pair(*name, t.id);
    if (auto id = d.vocab.find(*name)) return std::make_pair(*name, *id);
    return std::nullopt;
  };
  nlohmann::json single = nlohmann::json::array(), special = nlohmann::json::object();
  auto add_special = [&](const char* key) {
    if (auto t = id_of(key)) {
      single.push_back({{"SpecialToken", {{"id", t->first}, {"type_id", 0}}}});
      special[t->first] = {{"id", t->first}, {"ids", {t->second}}, {"tokens", {t->first}}};
    }
  };
  if (config.value("add_bos_token", true)) add_special("bos_token");
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (config.value("add_eos_token", false)) add_special("eos_token");
  d.post_processor = {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special}};
}

TokenizerDefinition definition_from_json(const nlohmann::json& j, const nlohmann::json& config) {
  TokenizerDefinition d;
  try {
    d.normalizer = j.value("normalizer", nlohmann::json());
    d.pre_tokenizer = j.value("pre_tokenizer", nlohmann::json());
    d.post_processor = j.value("post_processor", nlohmann::json());
    d.decoder = j.value("decoder", nlohmann::json());
    load_model(j.at("model"), d);
    for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
      AddedToken t;
      t.id = a.at("id").get<int32_t>();
      t.content = a.at("content").get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      t.normalized = a.value("normalized", !t.special);
      d.added_tokens.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("tokenizer.json does not have the expected structure (") + e.what() + ").");
  }
  if (config.is_object()) {
    try {
      apply_bos_eos_flags(config, d);
      auto find = [&](const std::string& name) -> std::optional<int32_t> {
        for (const auto& t : d.added_tokens)
          if (t.content == name) return t.id;
        return d.vocab.find(name);
      };
      if (auto bos = token_name(config, "bos_token")) d.bos_token_id = find(*bos);
      if (auto eos = token_name(config, "eos_token"))
        if (auto id = find(*eos)) d.eos_token_ids.push_back(*id);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(std::string("tokenizer_config.json does not have the expected structure (") + e.what() + ").");
    }
  }
  return d;
}

// What a tokenizer file is refused for while it is built (a normalizer onecat lacks, a merge of
// tokens the vocabulary does not have, a repeated id) is the file's problem: an InputError, so
// the CLI exits 2 and the server names the file (a plain Error meant exit 1, 'internal').
Tokenizer built_from_files(TokenizerDefinition d) {
  try {
    return Tokenizer(std::move(d));
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(e.what());
  }
}

}  // namespace

Tokenizer Tokenizer::from_hf_json(const std::string& tokenizer_json, const std::string& tokenizer_config_json) {
  nlohmann::json j = parse_json(tokenizer_json, "tokenizer.json");
  nlohmann::json config =
      tokenizer_config_json.empty() ? nlohmann::json() : parse_json(tokenizer_config_json, "tokenizer_config.json");
  return built_from_files(definition_from_json(j, config));
}

Tokenizer Tokenizer::from_hf_directory(const std::filesystem::path& dir) {
  auto path = dir / "tokenizer.json";
  auto text = try_read_file(path);
  if (!text)
    throw InputError(path.string() + " cannot be read; a checkpoint directory needs the Hugging Face tokenizer.json.");
  nlohmann::json j = parse_json(*text, path.string());
  nlohmann::json config;
  if (auto c = try_read_file(dir / "tokenizer_config.json"))
    config = parse_json(*c, (dir / "tokenizer_config.json").string());
  if (auto m = try_read_file(dir / "special_tokens_map.json")) {
    if (!config.is_object()) config = nlohmann::json::object();
    nlohmann::json map = parse_json(*m, (dir / "special_tokens_map.json").string());
    for (const char* key : {"bos_token", "eos_token"})
      if (!config.contains(key) && map.contains(key)) config[key] = map[key];
  }
  TokenizerDefinition d = definition_from_json(j, config);
  // generation_config.json lists every id that ends generation (often more than one).
  if (auto g = try_read_file(dir / "generation_config.json")) {
    const std::string where = (dir / "generation_config.json").string();
    nlohmann::json gen = parse_json(*g, where);
    try {
      auto eos = gen.value("eos_token_id", nlohmann::json());
      if (eos.is_number_integer()) eos = nlohmann::json::array({eos});
      if (eos.is_array()) {
        for (const auto& id : eos)
          if (std::find(d.eos_token_ids.begin(), d.eos_token_ids.end(), id.get<int32_t>()) == d.eos_token_ids.end())
            d.eos_token_ids.push_back(id.get<int32_t>());
      }
      if (!d.bos_token_id && gen.value("bos_token_id", nlohmann::json()).is_number_integer())
        d.bos_token_id = gen["bos_token_id"].get<int32_t>();
    } catch (const nlohmann::json::exception& e) {
      throw InputError(where + " does not have the expected structure (" + e.what() + ").");
    }
  }
  return built_from_files(std::move(d));
}

}  // namespace onecat::tokenizer
