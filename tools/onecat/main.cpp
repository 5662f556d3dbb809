#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "tools/onecat/commands.h"

namespace {

// The command the arguments name ("onecat cache export"), walked from argv as CLI11 would.
struct Command {
  const CLI::App* app;
  std::string path = "onecat";
  std::string next_word;  // the word after it, when that is not an option (empty otherwise)
};

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

Command command_named(const CLI::App& app, int argc, char** argv) {
  Command c{&app};
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') break;
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : subcommands_of(*c.app)) {
      if (s->check_name(word)) sub = s;
    }
    if (!sub) {
      c.next_word = word;
      break;
    }
    c.app = sub;
    c.path += " " + sub->get_name();
  }
  return c;
}

std::string command_list(const CLI::App& app) {
  const std::vector<const CLI::App*> subs = subcommands_of(app);
  std::string out;
  for (size_t i = 0; i < subs.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == subs.size() ? " or " : ", ") + subs[i]->get_name();
  }
  return out;
}

// CLI11's message on one line, at most kMaxMessage bytes: it echoes what was typed.
std::string one_line(std::string text) {
  constexpr size_t kMaxMessage = 240;
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '.')) text.pop_back();
  if (text.size() > kMaxMessage) {
    size_t cut = kMaxMessage;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "…";
  }
  return text;
}

// A usage error as one sentence that names the bad argument and the command's --help.
std::string usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const Command c = command_named(app, argc, argv);
  const bool takes_commands = !subcommands_of(*c.app).empty();
  if (takes_commands && !c.next_word.empty()) {
    return "unknown command " + onecat::quoted_input(c.next_word) + " for " + c.path + "; use " + command_list(*c.app) +
           " (" + c.path + " --help)";
  }
  if (takes_commands && c.app->get_require_subcommand_min() > 0 && c.app->get_subcommands().empty()) {
    return c.path + " needs a command: " + command_list(*c.app) + " (" + c.path + " --help)";
  }
  return c.path + ": " + one_line(e.what()) + " (" + c.path + " --help)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"onecat: generated, autotuned LLM kernels for NVIDIA Volta (sm_70) and later GPUs"};
  app.require_subcommand(1);
  onecat::cli::add_info(app);
  onecat::cli::add_kernel_commands(app);
  onecat::cli::add_cache(app);
  onecat::cli::add_bench(app);
  onecat::cli::add_tune(app);
  onecat::cli::add_chat_template(app);
  onecat::cli::add_text_commands(app);
  onecat::cli::add_generate(app);
  onecat::cli::add_throughput(app);
  onecat::cli::add_serve(app);
  onecat::cli::add_audit(app);
  onecat::cli::add_step_cost(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // the command printed its outcome and asks for this status
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "onecat: error: %s\n", usage_error(app, e, argc, argv).c_str());
    return 2;
  } catch (const onecat::InputError& e) {
    std::fprintf(stderr, "onecat: error: %s\n", e.what());
    return 2;
  } catch (const onecat::Error& e) {
    std::fprintf(stderr, "onecat: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
