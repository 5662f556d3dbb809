#include <cstdio>

#include "runtime/cuda/error.h"
#include "tools/onecat/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"onecat: generated, autotuned LLM kernels for NVIDIA Volta (sm_70) and later GPUs"};
  app.require_subcommand(1);
  onecat::cli::add_info(app);
  onecat::cli::add_kernel_commands(app);
  onecat::cli::add_cache(app);
  onecat::cli::add_bench(app);
  onecat::cli::add_tune(app);
  onecat::cli::add_text_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const onecat::InputError& e) {
    std::fprintf(stderr, "onecat: error: %s\n", e.what());
    return 2;
  } catch (const onecat::Error& e) {
    std::fprintf(stderr, "onecat: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
