// A checkpoint's chat template (Jinja) rendered in C++ exactly as transformers'
// apply_chat_template renders it with Python's jinja2 (docs/chat_template.md).
//
//   ChatTemplate t(source);                       // parses; TemplateError names the line
//   std::string prompt = t.apply(request, tokens);
//
// Anything outside the supported subset of Jinja, and any error jinja2 would raise
// (including the template's own raise_exception), is a TemplateError (an InputError) with
// one sentence naming the template line; output is never a guess.
#pragma once
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "models/chat/error.h"

namespace onecat::chat {

struct Stmt;

// What apply_chat_template receives.
struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools (the template sees tools = none)
  bool add_generation_prompt = false;
  // Extra template variables (enable_thinking, ...); they override the special tokens.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // What strftime_now() formats (UTC); unset: the local time now.
  std::optional<std::time_t> now;
};

class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // apply() and render() keep no state between calls: one ChatTemplate may serve many threads.
  // Renders with transformers' variables: messages, tools, documents (none),
  // add_generation_prompt, then `special_tokens` (bos_token, eos_token, ...), then kwargs.
  std::string apply(const ChatRequest& request,
                    const nlohmann::ordered_json& special_tokens = nlohmann::ordered_json::object()) const;
  // Renders with exactly these variables (a JSON object).
  std::string render(const nlohmann::ordered_json& variables, std::optional<std::time_t> now = std::nullopt) const;

 private:
  std::unique_ptr<std::vector<std::unique_ptr<Stmt>>> program_;
};

// A checkpoint directory's chat template and special tokens, chosen as transformers does:
// additional_chat_templates/tool_use.jinja for a request with tools if present, else
// chat_template.jinja, else tokenizer_config.json's chat_template (a string, or a list of
// {name, template}: "tool_use" when tools are given and it exists, else "default").
struct CheckpointChatTemplate {
  std::string source;
  std::string origin;  // e.g. "chat_template.jinja", "tokenizer_config.json (tool_use)"
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // bos_token, eos_token, ...
};

CheckpointChatTemplate load_chat_template(const std::filesystem::path& checkpoint_dir, bool with_tools);

// The special tokens (bos_token, eos_token, ...) of a checkpoint's tokenizer_config.json, for a
// template given from elsewhere (serve's --chat-template); empty without that file.
nlohmann::ordered_json checkpoint_special_tokens(const std::filesystem::path& checkpoint_dir);

// vLLM's --chat-template: a file's text, or the template itself when `value` is no file but
// reads as one (it holds "{{" or "{%"). InputError otherwise.
std::string chat_template_argument(const std::string& value);

}  // namespace onecat::chat
