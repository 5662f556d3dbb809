// onecat.ChatTemplate and onecat.load_chat_template: models/chat for Python
// (docs/chat_template.md). Conversations cross as JSON text, so key order survives and the
// C++ side sees exactly the values transformers' jinja2 would.
#include "models/chat/chat_template.h"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "models/chat/ordered_json.h"
#include "python/bindings/families.h"

namespace onecat::python {
namespace {

nlohmann::ordered_json parse_json(const std::string& text, const char* what) {
  try {
    return chat::parse_ordered_json(text);
  } catch (const nlohmann::json::exception&) {
    throw InputError(std::string(what) + " is not valid JSON");
  }
}

}  // namespace

void bind_chat_template(py::module_& m) {
  using chat::ChatTemplate;
  py::class_<ChatTemplate>(m, "ChatTemplate", "A Jinja chat template rendered as transformers' apply_chat_template does")
      .def(py::init<const std::string&>(), py::arg("source"))
      .def(
          "apply_json",
          [](const ChatTemplate& t, const std::string& messages, const std::string& tools, bool add_generation_prompt,
             const std::string& special_tokens, const std::string& kwargs) {
            chat::ChatRequest r;
            r.messages = parse_json(messages, "messages");
            r.tools = tools.empty() ? nlohmann::ordered_json() : parse_json(tools, "tools");
            r.add_generation_prompt = add_generation_prompt;
            r.kwargs = parse_json(kwargs, "kwargs");
            const nlohmann::ordered_json special = parse_json(special_tokens, "special_tokens");
            py::gil_scoped_release release;
            return t.apply(r, special);
          },
          py::arg("messages"), py::arg("tools"), py::arg("add_generation_prompt"), py::arg("special_tokens"),
          py::arg("kwargs"));
  m.def(
      "load_chat_template",
      [](const std::filesystem::path& dir, bool with_tools) {
        chat::CheckpointChatTemplate c = chat::load_chat_template(dir, with_tools);
        return py::make_tuple(c.source, c.origin, c.special_tokens.dump());
      },
      py::arg("checkpoint_dir"), py::arg("with_tools") = false);
}

}  // namespace onecat::python
