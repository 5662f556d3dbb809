// onecat chat-template: a conversation rendered with a checkpoint's chat template, as
// transformers' apply_chat_template renders it (docs/chat_template.md).
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "models/chat/chat_template.h"
#include "models/chat/ordered_json.h"
#include "models/checkpoint/locate.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

using ordered_json = nlohmann::ordered_json;

struct ChatOptions {
  std::string model, template_file, messages_file, tools_file, kwargs;
  bool add_generation_prompt = false, json = false;
};

std::string read_file(const std::string& path) {
  if (path == "-") {
    std::ostringstream s;
    s << std::cin.rdbuf();
    return s.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + path + ".");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

ordered_json parse_json(const std::string& text, const std::string& what) {
  try {
    return chat::parse_ordered_json(text);
  } catch (const nlohmann::json::exception&) {
    throw InputError(what + " is not valid JSON.");
  }
}

void run_chat_template(const ChatOptions& o) {
  chat::ChatRequest request;
  ordered_json messages = parse_json(read_file(o.messages_file), o.messages_file);
  // Either the messages themselves or an OpenAI-style request body {"messages": [...], "tools": [...]}.
  if (messages.is_object()) {
    if (messages.contains("tools")) request.tools = messages["tools"];
    messages = messages.contains("messages") ? messages["messages"] : ordered_json();
  }
  if (!messages.is_array()) throw InputError(o.messages_file + " must hold a JSON array of messages.");
  request.messages = messages;
  if (!o.tools_file.empty()) request.tools = parse_json(read_file(o.tools_file), o.tools_file);
  if (!request.tools.is_null() && !request.tools.is_array())
    throw InputError("the tools must be a JSON array of tool schemas.");
  if (!o.kwargs.empty()) {
    request.kwargs = parse_json(o.kwargs, "--kwargs");
    if (!request.kwargs.is_object())
      throw InputError("--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'.");
  }
  request.add_generation_prompt = o.add_generation_prompt;

  std::string source, origin;
  ordered_json special_tokens = ordered_json::object();
  if (!o.model.empty()) {
    chat::CheckpointChatTemplate c = chat::load_chat_template(o.model, !request.tools.is_null());
    source = c.source;
    origin = o.model + ": " + c.origin;
    special_tokens = c.special_tokens;
  } else {
    source = read_file(o.template_file);
    origin = o.template_file;
  }
  std::string text = chat::ChatTemplate(source).apply(request, special_tokens);
  if (o.json) {
    ordered_json j = {{"template", origin}, {"text", text}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << text;
  }
}

}  // namespace

void add_chat_template(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat-template", "Render a conversation with a chat template exactly as transformers' apply_chat_template does");
  auto o = std::make_shared<ChatOptions>();
  auto* model =
      cmd->add_option("--model", o->model, "Checkpoint directory (chat_template.jinja or tokenizer_config.json)");
  auto* file = cmd->add_option("--template", o->template_file, "A Jinja chat template file");
  model->excludes(file);
  file->excludes(model);
  cmd->add_option("--messages", o->messages_file,
                  "JSON file (- for stdin): an array of messages, or {\"messages\": [...], \"tools\": [...]}")
      ->required();
  cmd->add_option("--tools", o->tools_file, "JSON file: an array of tool schemas");
  cmd->add_flag("--add-generation-prompt", o->add_generation_prompt, "End with the assistant's turn header");
  cmd->add_option("--kwargs", o->kwargs,
                  "Extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
  cmd->add_flag("--json", o->json, "Print {\"template\", \"text\"} as JSON");
  cmd->callback([o] {
    if (o->model.empty() && o->template_file.empty())
      throw InputError("chat-template needs --model DIR or --template FILE.");
    if (!o->model.empty()) o->model = models::locate_checkpoint(o->model);
    run_chat_template(*o);
  });
}

}  // namespace onecat::cli
