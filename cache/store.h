// The kernel cache: one SQLite file in WAL mode with a busy timeout, so many processes
// may compile, tune and read at once. Each binary is one row written in one statement
// (INSERT … ON CONFLICT DO NOTHING): a crash never leaves half an entry. Each tuning
// record is one row too; a newer measurement for the same key replaces the older one.
// Export/import of whole stores: cache/export.h.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cache/record.h"

struct sqlite3;

namespace onecat {

// 1: binaries. 2: tunings.
inline constexpr int kSchemaVersion = 2;
inline constexpr const char* kStoreFormat = "onecat-kernel-cache";

// A tuning record's key (ARCHITECTURE.md rule 2): SHA-256 hex over the length-prefixed
// device fingerprint (name, sm, SM count, driver, NVRTC version), family, generator version,
// canonical spec and M bucket.
std::string tuning_key(const DeviceFingerprint& device, const std::string& family, int generator_version,
                       const std::string& spec, int64_t bucket);
// The key of a record's own fields.
std::string tuning_key(const TuningRecord& record);

// A meta table's schema_version text as a number: plain decimal digits of a version this
// format can have; nullopt for anything else ("-1", "abc", "", "99999999999").
std::optional<int> parse_schema_version(const std::string& text);

struct ImportReport;
class ImportChecker;

// A cache row whose cubin does not match its checksum (damaged on disk or tampered with).
class CorruptEntry : public Error {
 public:
  using Error::Error;
};

class Store {
 public:
  // Opens (creating it and its directory, mode 0700, if missing) and migrates to the
  // current schema. Throws Error with one clear sentence for a file that is not an onecat
  // cache, is damaged, or was written by a newer onecat.
  // kCache: the user's kernel cache, refused when another user owns it or can write it
  // (check_trusted). kScratch: a file this process creates itself (an export being written).
  enum class Use { kCache, kScratch };
  explicit Store(std::string path, Use use = Use::kCache);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }
  // True when the file (or its directory) is not writable by this process: it was opened
  // read-only, lookups work and writes are skipped (a fleet may share a read-only cache).
  bool read_only() const { return read_only_; }
  int schema_version() const;

  // A row whose cubin no longer matches its stored checksum is never returned: it throws
  // CorruptEntry naming the key, and the caller recompiles (replace_binary).
  std::optional<KernelBinary> find_binary(const std::string& key) const;
  // True when written, false when a row with that key was already there.
  bool put_binary(const KernelBinary& binary);
  // Writes the row whatever was there (a recompiled replacement for a corrupt entry).
  void replace_binary(const KernelBinary& binary);
  // Rows without their cubin, ordered by family, spec, arch, config.
  std::vector<KernelBinary> list_binaries() const;

  // One statement (INSERT … ON CONFLICT(key) DO UPDATE): a record with the same key is
  // replaced by this newer measurement. An empty record.key is filled with tuning_key(record).
  // Returns true when no record had that key just before, false when one was replaced.
  bool put_tuning(const TuningRecord& record);
  std::optional<TuningRecord> find_tuning(const std::string& key) const;
  // Ordered by family, spec, bucket, device name.
  std::vector<TuningRecord> list_tunings() const;

  struct Stats {
    int64_t binaries = 0;
    int64_t tunings = 0;
    int64_t cubin_bytes = 0;
    int64_t file_bytes = 0;
    std::map<std::string, int64_t> by_arch;
    std::map<std::string, int64_t> by_family;
  };
  Stats stats() const;

  struct Verification {
    int64_t checked = 0;          // binaries
    int64_t tunings_checked = 0;  // tuning records
    std::vector<std::string> problems;  // empty when the store is sound
  };
  // SQLite's integrity check, the schema, every cubin against its checksum and ELF header,
  // and every tuning record's candidates JSON and key.
  Verification verify() const;
  // Removes every binary and tuning record in one transaction; returns how many binaries
  // (and, through `tunings_removed`, how many tuning records).
  int64_t clear(int64_t* tunings_removed = nullptr);

  // Deletes the file and its WAL/SHM companions (for `cache clear --force` on a damaged file).
  static void remove_files(const std::string& path);

 private:
  friend ImportReport import_cache(Store& into, const std::string& file, bool verify, const ImportChecker& checker);
  void exec(const char* sql) const;
  void require_writable(const char* what) const;
  // Checks the meta table; with migrate, creates or migrates it to the current schema in one
  // transaction, otherwise (read-only) requires the current schema.
  void check_format_and_version(bool migrate);
  std::string path_;
  sqlite3* db_ = nullptr;
  bool read_only_ = false;
};

}  // namespace onecat
