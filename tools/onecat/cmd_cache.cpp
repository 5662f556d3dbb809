#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/error.h"
#include "cache/paths.h"
#include "cache/store.h"
#include "runtime/jit/import.h"
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
                                  {"tunings", st.tunings}, {"cubin_bytes", st.cubin_bytes}, {"file_bytes", st.file_bytes}, {"by_arch", st.by_arch},
                                  {"by_family", st.by_family}}
                       .dump(2)
                << "\n";
      return;
    }
    std::printf("cache %s (schema %d)\n%lld binaries, %.1f KiB of cubins, %lld tuning records, %.1f KiB on disk\n",
                store.path().c_str(), store.schema_version(), (long long)st.binaries, st.cubin_bytes / 1024.0,
                (long long)st.tunings, st.file_bytes / 1024.0);
    for (const auto& [arch, n] : st.by_arch) std::printf("  %-8s %lld\n", arch.c_str(), (long long)n);
    for (const auto& [family, n] : st.by_family) std::printf("  %-8s %lld\n", family.c_str(), (long long)n);
  });
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// default_us / best_us, or NaN when either is unknown.
double speedup(const TuningRecord& t) {
  return t.best_us > 0 && std::isfinite(t.best_us) && std::isfinite(t.default_us) ? t.default_us / t.best_us : std::nan("");
}

void list_tunings(const Store& store, bool json) {
  auto rows = store.list_tunings();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : rows) {
      nlohmann::json candidates = nlohmann::json::array();
      for (const auto& c : t.candidates) {
        candidates.push_back({{"config", c.config}, {"status", c.status}, {"median_us", number_or_null(c.median_us)},
                              {"min_us", number_or_null(c.min_us)}, {"max_us", number_or_null(c.max_us)},
                              {"detail", c.detail}});
      }
      out.push_back({{"key", t.key}, {"family", t.family}, {"generator_version", t.generator_version}, {"spec", t.spec},
                     {"bucket", t.bucket},
                     {"device",
                      {{"name", t.device.name}, {"sm", t.device.sm}, {"multiprocessors", t.device.multiprocessors},
                       {"driver", t.device.driver}, {"nvrtc_version", t.device.nvrtc_version}}},
                     {"config", t.config}, {"default_config", t.default_config}, {"best_us", number_or_null(t.best_us)},
                     {"default_us", number_or_null(t.default_us)}, {"speedup", number_or_null(speedup(t))},
                     {"candidates", candidates}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  Table table({"spec", "bucket", "device", "config", "best_us", "default_us", "speedup"}, {1, 4, 5, 6});
  for (const auto& t : rows) {
    table.row({t.spec, std::to_string(t.bucket), t.device.name, t.config, format("%.2f", t.best_us),
               format("%.2f", t.default_us), format("%.2fx", speedup(t))});
  }
  table.print();
}

void add_ls(CLI::App* cache) {
  auto* cmd = cache->add_subcommand("ls", "List the cached binaries (or, with --tunings, the tuning records)");
  auto json = std::make_shared<bool>(false);
  auto tunings = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->add_flag("--tunings", *tunings,
                "List the tuning records: spec, M bucket, device, chosen config, best and default microseconds, speedup");
  cmd->callback([json, tunings] {
    Store store(cache_file());
    if (*tunings) {
      list_tunings(store, *json);
      return;
    }
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
    Table table({"key", "spec", "config", "arch", "nvrtc", "regs", "spill"}, {5, 6});
    for (const auto& b : rows) {
      table.row({b.key.substr(0, 12), b.spec, b.config, b.arch, b.nvrtc_version, std::to_string(b.usage.registers),
                 std::to_string(b.usage.spill_store_bytes + b.usage.spill_load_bytes)});
    }
    table.print();
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
      std::cout << nlohmann::json{{"path", store.path()}, {"checked", v.checked}, {"tunings_checked", v.tunings_checked}, {"ok", v.problems.empty()},
                                  {"problems", v.problems}}
                       .dump(2)
                << "\n";
    } else {
      for (const auto& p : v.problems) std::printf("problem: %s\n", p.c_str());
      std::printf("%s: %lld tuning records and %lld binaries checked, %s\n", store.path().c_str(),
                  (long long)v.tunings_checked, (long long)v.checked, v.problems.empty() ? "OK" : (std::to_string(v.problems.size()) + " problems").c_str());
    }
    if (!v.problems.empty()) throw CLI::RuntimeError(1);
  });
}

void add_clear(CLI::App* cache) {
  auto* cmd = cache->add_subcommand("clear", "Remove every cached binary and tuning record");
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
    int64_t tunings = 0;
    int64_t n = store.clear(&tunings);
    std::printf("removed %lld binaries and %lld tuning records from %s\n", (long long)n, (long long)tunings, path.c_str());
  });
}

void add_export(CLI::App* cache) {
  auto* cmd = cache->add_subcommand(
      "export", "Write the cache (or part of it) to one SQLite file that `onecat cache import` reads on another machine");
  auto file = std::make_shared<std::string>();
  auto filter = std::make_shared<ExportFilter>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *file, "The file to write (replaced once complete)")->required();
  cmd->add_option("--arch", filter->arch,
                  "Only binaries for this arch (sm_70, 70 or 7.0) and tuning records of devices with that compute capability");
  cmd->add_option("--device", filter->device, "Only tuning records whose device name contains NAME (case-insensitive)")
      ->type_name("NAME");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([file, filter, json] {
    Store store(cache_file());
    ExportReport r = export_cache(store, *file, *filter);
    if (*json) {
      std::cout << nlohmann::json{{"file", r.file}, {"from", store.path()}, {"binaries", r.binaries}, {"tunings", r.tunings}}
                       .dump(2)
                << "\n";
      return;
    }
    std::printf("exported %lld binaries and %lld tuning records from %s to %s\n", (long long)r.binaries,
                (long long)r.tunings, store.path().c_str(), r.file.c_str());
  });
}

void add_import(CLI::App* cache) {
  auto* cmd = cache->add_subcommand(
      "import", "Merge a file written by `onecat cache export` into the cache; entries already there are kept");
  auto file = std::make_shared<std::string>();
  auto verify = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *file, "The exported file (opened read-only)")->required();
  cmd->add_flag("--verify", *verify,
                "Recompile every binary with the same NVRTC version and import only if each gives the same key and the "
                "same cubin byte for byte");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([file, verify, json] {
    Store store(cache_file());
    ImportReport r = import_cache(store, *file, *verify);
    if (*json) {
      nlohmann::json checks = nlohmann::json::array();
      for (const auto& v : r.verification) {
        checks.push_back({{"key", v.key}, {"spec", v.spec}, {"config", v.config}, {"arch", v.arch}, {"ok", v.ok},
                          {"detail", v.detail}});
      }
      std::cout << nlohmann::json{{"file", r.file}, {"into", store.path()}, {"imported", r.imported},
                                  {"binaries_added", r.binaries_added}, {"binaries_present", r.binaries_present},
                                  {"tunings_added", r.tunings_added}, {"tunings_present", r.tunings_present},
                                  {"verified", r.verified}, {"verification", checks}}
                       .dump(2)
                << "\n";
    } else {
      for (const auto& v : r.verification) {
        std::printf("%s %-12s %s [%s] %s%s%s\n", v.ok ? "ok      " : "MISMATCH", v.key.substr(0, 12).c_str(),
                    v.spec.c_str(), v.config.c_str(), v.arch.c_str(), v.ok ? "" : ": ", v.detail.c_str());
      }
      if (r.imported) {
        std::printf("imported %s into %s: %lld binaries added, %lld already present; %lld tuning records added, %lld "
                    "already present%s\n",
                    r.file.c_str(), store.path().c_str(), (long long)r.binaries_added, (long long)r.binaries_present,
                    (long long)r.tunings_added, (long long)r.tunings_present,
                    r.verified ? "; every binary verified" : "");
      }
    }
    if (!r.imported) {
      throw Error("verification failed for " + std::to_string(r.verification_failures()) + " of " +
                  std::to_string(r.verification.size()) + " binaries in " + r.file +
                  "; nothing was imported (import without --verify to trust the file as it is)");
    }
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
  add_export(cache);
  add_import(cache);
}

}  // namespace onecat::cli
