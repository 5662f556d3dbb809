// The onecat command-line front end: each command registers itself on the app.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/arch.h"
#include "engine/engine.h"

namespace onecat::cli {

void add_info(CLI::App& app);
void add_kernel_commands(CLI::App& app);  // emit, compile, check
void add_cache(CLI::App& app);
void add_bench(CLI::App& app);
void add_tune(CLI::App& app);
void add_chat_template(CLI::App& app);
void add_text_commands(CLI::App& app);  // tokenize, detokenize
void add_generate(CLI::App& app);
void add_throughput(CLI::App& app);  // the engine benchmark
void add_serve(CLI::App& app);       // the OpenAI-compatible HTTP server
void add_audit(CLI::App& app);       // speculative decoding's quality gates
void add_step_cost(CLI::App& app);   // a verify step against a decode step

// The speculative-decoding flags, as serve, throughput and audit take them, into the options'
// fields: --num-draft-tokens (alias --num-speculative-tokens; num_speculative_tokens),
// --speculative, the n-gram drafter's --prompt-lookup-min/--prompt-lookup-max (ngram_min/max)
// and the draft model's --draft-p-min; `k_default` says what an absent --num-draft-tokens means.
void add_speculative_options(CLI::App* cmd, engine::EngineOptions& options, const std::string& k_default);

// --device-sampling / --no-device-sampling (EngineOptions::device_sampling, on by default), as
// serve and throughput take it.
void add_device_sampling_option(CLI::App* cmd, bool& device_sampling);

// --device auto|cpu|cuda (default auto: the GPU where there is one), as generate, throughput,
// serve, audit and step-cost take it; resolve_device parses it and, where auto found no GPU,
// says on stderr that the CPU backend runs.
void add_device_option(CLI::App* cmd, std::string& device);
model::Device resolve_device(const std::string& device, const char* command);

// --kv-cache-dtype auto|fp8|fp8_e4m3|fp8_e5m2 (ModelOptions::kv_cache_dtype, parsed by
// models::parse_kv_cache_dtype where the model is made), as serve, throughput and generate take it.
void add_kv_cache_dtype_option(CLI::App* cmd, std::string& kv_cache_dtype);

// "1,2,3" → ids; InputError naming `option` and the bad item.
std::vector<int32_t> parse_ids(const std::string& text, const std::string& option);

// "native" → the first GPU's arch (without one, an Error suggesting --arch sm_70); otherwise
// Arch::parse.
Arch resolve_arch(const std::string& text);

// A text table whose columns are as wide as their widest cell, so a long spec does not push
// the rest of its row out of line. Columns named in `right` are right-aligned (numbers).
class Table {
 public:
  Table(std::vector<std::string> header, std::vector<size_t> right = {});
  void row(std::vector<std::string> cells);
  void print() const;  // to stdout, header first

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> right_;
};

// The integer at the start of `item` (std::stoll's rules: leading whitespace, a sign) and in
// `used` how many characters it took; nullopt, used 0, when there is none or it overflows.
std::optional<long long> leading_integer(const std::string& item, size_t& used);

// printf into a std::string, for table cells.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

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
