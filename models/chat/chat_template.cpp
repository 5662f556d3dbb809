#include "models/chat/chat_template.h"

#include "base/file.h"
#include "models/chat/ast.h"
#include "models/chat/interpreter.h"
#include "models/chat/lexer.h"
#include "models/chat/ordered_json.h"
#include "models/chat/parser.h"

namespace onecat::chat {

ChatTemplate::ChatTemplate(const std::string& source) : program_(std::make_unique<Body>(parse(lex(source)))) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& variables, std::optional<std::time_t> now) const {
  if (!variables.is_object()) throw TemplateError(0, "the template variables must be a JSON object");
  RenderOptions options;
  options.now = now;
  return run(*program_, Value::from_json(variables), options);
}

std::string ChatTemplate::apply(const ChatRequest& request, const nlohmann::ordered_json& special_tokens) const {
  if (!request.messages.is_array()) throw TemplateError(0, "the messages must be a JSON array");
  if (!request.tools.is_null() && !request.tools.is_array()) throw TemplateError(0, "the tools must be a JSON array");
  if (!request.kwargs.is_object()) throw TemplateError(0, "the extra template variables must be a JSON object");
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = request.messages;
  vars["tools"] = request.tools;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = request.add_generation_prompt;
  if (special_tokens.is_object())
    for (const auto& [k, v] : special_tokens.items()) vars[k] = v;
  for (const auto& [k, v] : request.kwargs.items()) vars[k] = v;
  return render(vars, request.now);
}

namespace {

nlohmann::ordered_json read_json(const std::filesystem::path& path) {
  try {
    return parse_ordered_json(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path.string() + " is not valid JSON (" + e.what() + ").");
  }
}

// A special token is a string or an AddedToken object {"content": "...", ...}.
void take_special_tokens(const nlohmann::ordered_json& config, nlohmann::ordered_json& out) {
  for (const char* name :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(name)) continue;
    const auto& t = config[name];
    if (t.is_string())
      out[name] = t;
    else if (t.is_object() && t.contains("content") && t["content"].is_string())
      out[name] = t["content"];
  }
}

}  // namespace

nlohmann::ordered_json checkpoint_special_tokens(const std::filesystem::path& dir) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) return out;
  const nlohmann::ordered_json config = read_json(config_path);
  if (!config.is_object()) throw InputError(config_path.string() + " must hold a JSON object.");
  take_special_tokens(config, out);
  return out;
}

std::string chat_template_argument(const std::string& value) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) return read_file(value);
  if (value.find("{{") != std::string::npos || value.find("{%") != std::string::npos) return value;
  throw InputError("--chat-template " + quoted_input(value) +
                   " is neither a file nor a template (a Jinja template holds {{ or {%).");
}

CheckpointChatTemplate load_chat_template(const std::filesystem::path& dir, bool with_tools) {
  if (!std::filesystem::is_directory(dir)) throw InputError(dir.string() + " is not a checkpoint directory.");
  CheckpointChatTemplate result;
  std::filesystem::path config_path = dir / "tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::exists(config_path)) {
    config = read_json(config_path);
    if (!config.is_object()) throw InputError(config_path.string() + " must hold a JSON object.");
    take_special_tokens(config, result.special_tokens);
  }
  // Newer transformers saves the default template as chat_template.jinja and named ones as
  // additional_chat_templates/NAME.jinja; "tool_use" serves requests with tools.
  std::filesystem::path tool_use = dir / "additional_chat_templates" / "tool_use.jinja";
  if (with_tools && std::filesystem::exists(tool_use)) {
    result.source = read_file(tool_use);
    result.origin = "additional_chat_templates/tool_use.jinja";
    return result;
  }
  if (std::filesystem::exists(dir / "chat_template.jinja")) {
    result.source = read_file(dir / "chat_template.jinja");
    result.origin = "chat_template.jinja";
    return result;
  }
  nlohmann::ordered_json entry = config.contains("chat_template") ? config["chat_template"] : nlohmann::ordered_json();
  std::string origin = "tokenizer_config.json";
  if (entry.is_null() && std::filesystem::exists(dir / "chat_template.json")) {
    nlohmann::ordered_json j = read_json(dir / "chat_template.json");
    if (j.is_object() && j.contains("chat_template")) entry = j["chat_template"];
    origin = "chat_template.json";
  }
  if (entry.is_string()) {
    result.source = entry.get<std::string>();
    result.origin = origin;
    return result;
  }
  if (entry.is_array()) {
    const nlohmann::ordered_json* chosen = nullptr;
    std::string chosen_name;
    for (const char* wanted : {"tool_use", "default"}) {
      if (std::string(wanted) == "tool_use" && !with_tools) continue;
      for (const auto& t : entry)
        if (t.is_object() && t.contains("name") && t["name"] == wanted && t.contains("template") &&
            t["template"].is_string()) {
          chosen = &t["template"];
          chosen_name = wanted;
          break;
        }
      if (chosen) break;
    }
    if (!chosen)
      throw InputError(
          origin + " in " + dir.string() +
          " lists several chat templates but none named \"default\" (or \"tool_use\" for a request with tools).");
    result.source = chosen->get<std::string>();
    result.origin = origin + " (" + chosen_name + ")";
    return result;
  }
  throw InputError(dir.string() +
                   " has no chat template (no chat_template.jinja and no chat_template in tokenizer_config.json).");
}

}  // namespace onecat::chat
