// The onecat command-line front end: each command registers itself on the app.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "codegen/arch.h"

namespace onecat::cli {

void add_info(CLI::App& app);
void add_kernel_commands(CLI::App& app);  // emit, compile, check
void add_cache(CLI::App& app);
void add_bench(CLI::App& app);
void add_tune(CLI::App& app);
void add_text_commands(CLI::App& app);  // tokenize, detokenize

// "native" → the first GPU's arch (Error without one); otherwise Arch::parse.
Arch resolve_arch(const std::string& text);

// A progress bar on stderr: redrawn in place on a terminal, a line per quarter otherwise.
class Progress {
 public:
  Progress(std::string what, size_t total);
  void tick();
  void done();

 private:
  std::string what_;
  size_t total_, count_ = 0;
  int last_quarter_ = 0;
  bool tty_;
  double start_;
};

}  // namespace onecat::cli
