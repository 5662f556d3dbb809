// Moving a kernel cache between machines: export writes one self-contained SQLite file
// (the store's schema plus `exported_by`/`exported_at` meta keys); import checks it whole
// and merges it into a store in one transaction, or changes nothing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/store.h"

namespace onecat {

struct ExportFilter {
  // "" = all; else an arch ("sm_70", "70", "7.0"): the binaries built for it and the tuning
  // records of devices with that compute capability.
  std::string arch;
  // "" = all; else the tuning records whose device name contains it (case-insensitive).
  // Binaries are not device-specific and are not filtered by it.
  std::string device;
};

struct ExportReport {
  std::string file;
  int64_t binaries = 0;
  int64_t tunings = 0;
};

// Writes `file` (replacing one that is there) through FILE.tmp-<pid>, renamed into place
// only once complete: a failure never leaves a half-written FILE. Throws InputError for a
// bad filter, Error when the file cannot be written.
ExportReport export_cache(const Store& from, const std::string& file, const ExportFilter& filter);

struct BinaryVerification {
  std::string key;
  std::string spec;
  std::string config;
  std::string arch;
  bool ok = false;
  std::string detail;  // why not, when !ok
};

struct ImportReport {
  std::string file;
  int64_t binaries_added = 0;
  int64_t binaries_present = 0;  // already in the store (same key): kept as they were
  int64_t tunings_added = 0;
  int64_t tunings_present = 0;  // a record with that key was already there: kept
  bool verified = false;        // verification was asked for
  std::vector<BinaryVerification> verification;  // one per binary in the file, with verify
  bool imported = false;        // false only when verification failed: nothing was imported
  int64_t verification_failures() const;
};

// What the store cannot judge by itself: whether a row is what this onecat's generators and
// compiler make. The layer that can compile supplies it (runtime/jit/import.h), so the store
// knows no kernel family and no NVRTC.
class ImportChecker {
 public:
  virtual ~ImportChecker() = default;
  // Why a binary row (its cubin already checked for its arch and kernel) is not what its spec,
  // config, arch, NVRTC version and options give; "" when sound.
  virtual std::string binary_inconsistency(const KernelBinary& b) const = 0;
  // The generator version of a family this onecat has; nullopt for an unknown family.
  virtual std::optional<int> generator_version(const std::string& family) const = 0;
  // Why a tuning record's spec and configs are not canonical ones of its family; "" when sound.
  virtual std::string spec_inconsistency(const TuningRecord& t) const = 0;
  // import --verify: recompiles the binary here and compares key and cubin bytes.
  virtual BinaryVerification verify(const KernelBinary& b) const = 0;
};

// Opens `file` read-only and checks all of it before writing anything: an onecat cache of
// a schema this onecat reads, SQLite integrity, every cubin against its checksum, every
// tuning record's family known with the current generator version, its candidates JSON and
// key (what needs the generators, through `checker`). Any problem throws InputError (one
// sentence naming the file) and `into` is unchanged. With `verify`, every binary is
// recompiled with the same NVRTC version and must give the same key and the same cubin byte
// for byte; otherwise the report lists what differs, imported is false, and nothing is
// imported. Then everything is merged in one transaction: binaries and tuning records
// already in the store are kept. Callers use runtime/jit/import.h's import_cache, which
// passes this onecat's generators and NVRTC.
ImportReport import_cache(Store& into, const std::string& file, bool verify, const ImportChecker& checker);

}  // namespace onecat
