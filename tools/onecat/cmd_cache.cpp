#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cache/paths.h"
#include "cache/store.h"
#include "runtime/cuda/error.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

void add_stats(CLI::App* cache) {
  auto* cmd = cache->add_subcommand("stats", "Count the cached binaries by arch and family");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    Store store(cache_file());
    Store::Stats st = store.stats();
    if (*json) {
      std::cout << nlohmann::json{{"path", store.path()}, {"schema_version", store.schema_version()}, {"binaries", st.binaries},
                                  {"cubin_bytes", st.cubin_bytes}, {"file_bytes", st.file_bytes}, {"by_arch", st.by_arch},
                                  {"by_family", st.by_family}}
                       .dump(2)
                << "\n";
      return;
    }
    std::printf("cache %s (schema %d)\n%lld binaries, %.1f KiB of cubins, %.1f KiB on disk\n", store.path().c_str(),
                store.schema_version(), (long long)st.binaries, st.cubin_bytes / 1024.0, st.file_bytes / 1024.0);
    for (const auto& [arch, n] : st.by_arch) std::printf("  %-8s %lld\n", arch.c_str(), (long long)n);
    for (const auto& [family, n] : st.by_family) std::printf("  %-8s %lld\n", family.c_str(), (long long)n);
  });
}

void add_ls(CLI::App* cache) {
  auto* cmd = cache->add_subcommand("ls", "List the cached binaries");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    Store store(cache_file());
    auto rows = store.list_binaries();
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& b : rows) {
        out.push_back({{"key", b.key}, {"family", b.family}, {"spec", b.spec}, {"config", b.config}, {"arch", b.arch},
                       {"nvrtc_version", b.nvrtc_version}, {"options", b.options}, {"lowered_name", b.lowered_name},
                       {"registers", b.usage.registers}, {"shared_bytes", b.usage.shared_bytes},
                       {"spill_store_bytes", b.usage.spill_store_bytes}, {"spill_load_bytes", b.usage.spill_load_bytes},
                       {"stack_bytes", b.usage.stack_bytes}, {"compile_ms", b.compile_ms}});
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::printf("%-12s %-44s %-28s %-6s %-6s %5s %6s\n", "key", "spec", "config", "arch", "nvrtc", "regs", "spill");
    for (const auto& b : rows) {
      std::printf("%-12s %-44s %-28s %-6s %-6s %5d %6d\n", b.key.substr(0, 12).c_str(), b.spec.c_str(), b.config.c_str(),
                  b.arch.c_str(), b.nvrtc_version.c_str(), b.usage.registers,
                  b.usage.spill_store_bytes + b.usage.spill_load_bytes);
    }
  });
}

void add_verify(CLI::App* cache) {
  auto* cmd = cache->add_subcommand("verify", "Check the cache file's integrity and every cubin against its checksum");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    Store store(cache_file());
    Store::Verification v = store.verify();
    if (*json) {
      std::cout << nlohmann::json{{"path", store.path()}, {"checked", v.checked}, {"ok", v.problems.empty()},
                                  {"problems", v.problems}}
                       .dump(2)
                << "\n";
    } else {
      for (const auto& p : v.problems) std::printf("problem: %s\n", p.c_str());
      std::printf("%s: %lld binaries checked, %s\n", store.path().c_str(), (long long)v.checked,
                  v.problems.empty() ? "OK" : (std::to_string(v.problems.size()) + " problems").c_str());
    }
    if (!v.problems.empty()) throw CLI::RuntimeError(1);
  });
}

void add_clear(CLI::App* cache) {
  auto* cmd = cache->add_subcommand("clear", "Remove every cached binary");
  auto force = std::make_shared<bool>(false);
  cmd->add_flag("--force", *force, "Delete the cache file itself even if it is damaged or not an onecat cache");
  cmd->callback([force] {
    const std::string path = cache_file();
    if (*force) {
      Store::remove_files(path);
      std::printf("removed %s\n", path.c_str());
      return;
    }
    Store store(path);
    int64_t n = store.clear();
    std::printf("removed %lld binaries from %s\n", (long long)n, path.c_str());
  });
}

}  // namespace

void add_cache(CLI::App& app) {
  auto* cache = app.add_subcommand("cache", "Inspect and manage the kernel cache ($ONECAT_CACHE_DIR)");
  cache->require_subcommand(1);
  add_stats(cache);
  add_ls(cache);
  add_verify(cache);
  add_clear(cache);
}

}  // namespace onecat::cli
