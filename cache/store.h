// The kernel cache: one SQLite file in WAL mode with a busy timeout, so many processes
// may compile, tune and read at once. Each binary is one row written in one statement
// (INSERT … ON CONFLICT DO NOTHING): a crash never leaves half an entry.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cache/record.h"

struct sqlite3;

namespace onecat {

inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kStoreFormat = "onecat-kernel-cache";

class Store {
 public:
  // Opens (creating it and its directory, mode 0700, if missing) and migrates to the
  // current schema. Throws Error with one clear sentence for a file that is not an onecat
  // cache, is damaged, or was written by a newer onecat.
  explicit Store(std::string path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const;

  std::optional<KernelBinary> find_binary(const std::string& key) const;
  // True when written, false when a row with that key was already there.
  bool put_binary(const KernelBinary& binary);
  // Rows without their cubin, ordered by family, spec, arch, config.
  std::vector<KernelBinary> list_binaries() const;

  struct Stats {
    int64_t binaries = 0;
    int64_t cubin_bytes = 0;
    int64_t file_bytes = 0;
    std::map<std::string, int64_t> by_arch;
    std::map<std::string, int64_t> by_family;
  };
  Stats stats() const;

  struct Verification {
    int64_t checked = 0;
    std::vector<std::string> problems;  // empty when the store is sound
  };
  // SQLite's integrity check, the schema, and every cubin against its checksum and ELF header.
  Verification verify() const;
  // Removes every entry in one transaction; returns how many.
  int64_t clear();

  // Deletes the file and its WAL/SHM companions (for `cache clear --force` on a damaged file).
  static void remove_files(const std::string& path);

 private:
  void exec(const char* sql) const;
  void migrate();
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace onecat
