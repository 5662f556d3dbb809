// Renders many chat-template cases in one process, for the jinja2 oracle test
// (python/tests/test_chat_template_jinja.py):
//   onecat_chat_batch JOBS.json > RESULTS.json
// JOBS: [{"template_file": PATH, "cases": [{"messages", "tools", "add_generation_prompt",
//         "kwargs", "now"}, ...]}, ...]
// RESULTS: one list per job, one {"text": ...} or {"error": ...} per case.
#include <fstream>
#include <iostream>
#include <sstream>

#include "models/chat/chat_template.h"

using onecat::chat::ChatRequest;
using onecat::chat::ChatTemplate;
using ordered_json = nlohmann::ordered_json;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onecat_chat_batch JOBS.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  ordered_json jobs = ordered_json::parse(in);
  ordered_json results = ordered_json::array();
  for (const auto& job : jobs) {
    ordered_json out = ordered_json::array();
    std::ifstream tf(job["template_file"].get<std::string>(), std::ios::binary);
    std::ostringstream source;
    source << tf.rdbuf();
    std::unique_ptr<ChatTemplate> tmpl;
    std::string parse_error;
    try {
      tmpl = std::make_unique<ChatTemplate>(source.str());
    } catch (const onecat::Error& e) {
      parse_error = e.what();
    }
    for (const auto& c : job["cases"]) {
      if (!tmpl) {
        out.push_back({{"error", parse_error}});
        continue;
      }
      ChatRequest r;
      r.messages = c["messages"];
      r.tools = c.value("tools", ordered_json());
      r.add_generation_prompt = c.value("add_generation_prompt", false);
      r.kwargs = c.value("kwargs", ordered_json::object());
      if (c.contains("now")) r.now = c["now"].get<std::time_t>();
      try {
        out.push_back({{"text", tmpl->apply(r)}});
      } catch (const onecat::Error& e) {
        out.push_back({{"error", e.what()}});
      }
    }
    results.push_back(out);
  }
  std::cout << results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
