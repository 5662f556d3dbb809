#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/engine/info.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {

Arch resolve_arch(const std::string& text) {
  if (text != "native") return Arch::parse(text);
  if (const std::string why = Driver::unavailable_reason(); !why.empty()) {
    throw Error(why + "; without a GPU, name the target arch, e.g. --arch sm_70 (Tesla V100)");
  }
  return Arch{Driver::require_gpu().device_info(0).sm};
}

Progress::Progress(std::string what, size_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(fileno(stderr))) {
  start_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Progress::tick() {
  ++count_;
  double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  double elapsed = now - start_;
  // No ETA: kernels differ in compile time by 10x and more (an attention kernel against an
  // rmsnorm), and a plan lists its cheap ones first, so an average over those done ran low
  // (13 s left at 31/121, done 25 s later).
  if (tty_) {
    constexpr int kWidth = 30;
    int filled = total_ ? int(kWidth * count_ / total_) : kWidth;
    std::fprintf(stderr, "\r%s [%s%s] %zu/%zu  %.0fs ", what_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), count_, total_, elapsed);
  } else if (total_ && int(4 * count_ / total_) > last_quarter_) {
    last_quarter_ = int(4 * count_ / total_);
    std::fprintf(stderr, "%s: %zu/%zu after %.0fs\n", what_.c_str(), count_, total_, elapsed);
  }
}

void Progress::done() {
  if (tty_) std::fprintf(stderr, "\n");
}

namespace {

void print_info(const nlohmann::json& j) {
  std::cout << "onecat " << "0.1.0\n";
  if (j["driver"].is_null()) {
    std::cout << "driver:  " << j["gpu_unavailable_reason"].get<std::string>() << "\n";
  } else {
    std::cout << "driver:  CUDA " << j["driver"]["version"].get<std::string>() << " (" << j["driver"]["path"].get<std::string>() << ")\n";
    if (j["gpus"].empty()) std::cout << "gpus:    " << j["gpu_unavailable_reason"].get<std::string>() << "\n";
  }
  for (const auto& g : j["gpus"]) {
    std::printf("gpu %d:   %s, %s, %d SMs, %.1f GiB; its kernels compile with %s%s\n", g["ordinal"].get<int>(),
                g["name"].get<std::string>().c_str(), g["arch"].get<std::string>().c_str(),
                g["multiprocessors"].get<int>(), g["memory_bytes"].get<double>() / (1 << 30),
                g["nvrtc"].is_null() ? "no NVRTC found here" : ("NVRTC " + g["nvrtc"].get<std::string>()).c_str(),
                g.value("programmatic_launch", false) ? "; programmatic dependent launch" : "");
  }
  if (j["nvrtc"].empty()) std::cout << "nvrtc:   none found; run scripts/setup or set ONECAT_NVRTC\n";
  auto arch_list = [](const nlohmann::json& archs) {
    std::string list;
    for (int a : archs) list += (list.empty() ? "sm_" : " sm_") + std::to_string(a);
    return list.empty() ? std::string("none (a library listed above targets each of its archs)") : list;
  };
  for (const auto& n : j["nvrtc"]) {
    std::cout << "nvrtc:   " << n["version"].get<std::string>() << " (" << n["path"].get<std::string>() << ")\n"
              << "         archs: " << arch_list(n["archs"]) << "\n"
              << "         compiles for: " << arch_list(n["compiles_for"]) << "\n";
  }
  if (!j["nvrtc"].empty()) std::cout << "         (a compile for an arch uses the first NVRTC listed that targets it)\n";
  std::cout << "cublas:  "
            << (j["cublas"].is_null() ? std::string("not found")
                                   : "version " + std::to_string(j["cublas"]["version"].get<int>()) + " (" +
                                         j["cublas"]["path"].get<std::string>() + ")")
            << "\n";
  for (const auto& g : j["gpus"]) {
    if (!g["cublas_unusable"].is_null()) {
      std::cout << "         gemm strategy=cublas cannot run on gpu " << g["ordinal"].get<int>() << ": "
                << g["cublas_unusable"].get<std::string>() << "\n";
    }
  }
  std::string fams;
  for (const auto& f : j["families"]) fams += (fams.empty() ? "" : ", ") + f["name"].get<std::string>() + " v" + std::to_string(f["generator_version"].get<int>());
  std::cout << "families: " << fams << "\n";
  std::cout << "cache:   " << j["cache"]["path"].get<std::string>();
  if (j["cache"].contains("error")) {
    std::cout << "\n         " << j["cache"]["error"].get<std::string>() << "\n";
  } else {
    std::cout << ", " << j["cache"]["binaries"].get<int64_t>() << " binaries";
    for (auto& [arch, n] : j["cache"]["by_arch"].items()) std::cout << (arch == j["cache"]["by_arch"].begin().key() ? " (" : ", ") << arch << ": " << n.get<int64_t>();
    std::cout << (j["cache"]["by_arch"].empty() ? "" : ")") << "\n";
  }
}

}  // namespace

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the CUDA driver and GPUs, every NVRTC found, and the kernel cache");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    nlohmann::json j = machine_info();
    if (*json) {
      std::cout << j.dump(2) << "\n";
    } else {
      print_info(j);
    }
  });
}

}  // namespace onecat::cli
