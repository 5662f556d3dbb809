#include "cache/export.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <csignal>
#include <dirent.h>
#include <memory>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>

#include "base/arch.h"
#include "base/error.h"
#include "base/sha256.h"
#include "cache/cubin.h"
#include "cache/sql.h"

namespace onecat {
namespace {

using sql::Stmt;

// Closes a connection on every path out.
struct Connection {
  sqlite3* db = nullptr;
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { close(); }
  void close() {
    if (db) sqlite3_close(db);
    db = nullptr;
  }
};

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// SQLite's integrity report is several lines ("*** in database main ***", then one per problem):
// its first problem, so the refusal stays one line.
std::string first_problem(std::string report) {
  const std::string header = "*** in database main ***";
  if (report.rfind(header, 0) == 0) report.erase(0, header.size());
  report.erase(0, std::min(report.size(), report.find_first_not_of("\n ")));
  return first_line(report).substr(0, 300);
}

bool damaged_message(const std::string& what) {
  for (const char* needle : {"not a database", "malformed", "disk I/O error", "database corrupt", "unable to open"}) {
    if (what.find(needle) != std::string::npos) return true;
  }
  return false;
}

// What a binary row claims must be what it holds: its cubin must be CUDA code for its arch
// that defines its kernel, and (through the checker) its key and kernel name must be the ones
// its spec, config and compiler give. So a row whose cubin was swapped with another's
// (checksum and all) is refused. "" when sound.
std::string binary_inconsistency(const KernelBinary& b, const ImportChecker& checker) {
  try {
    const Arch arch = Arch::parse(b.arch);
    const CubinFacts facts = read_cubin(b.cubin);
    if (!facts.built_for(arch.sm)) return "its cubin is not built for " + arch.name();
    if (!facts.defines(b.lowered_name)) return "its cubin does not define its kernel " + b.lowered_name.substr(0, 120);
  } catch (const Error& e) {
    return first_line(e.what()).substr(0, 300);
  }
  return checker.binary_inconsistency(b);
}

// A tuning record must name a canonical spec, configs valid for it and a real bucket, or a
// serving process would dispatch a kernel nobody checked. "" when sound.
std::string tuning_inconsistency(const TuningRecord& t, const ImportChecker& checker) {
  if (!is_bucket(t.bucket)) {
    return "its bucket is not a power of two from 1 to " + std::to_string(kMaxTuningBucket);
  }
  if (std::string why = checker.spec_inconsistency(t); !why.empty()) return why;
  if (t.device.sm < 10 || t.device.multiprocessors < 1) return "its device fingerprint is not of a real GPU";
  return "";
}

// What an export file holds, read whole and checked before anything is written.
struct Contents {
  std::vector<KernelBinary> binaries;
  std::vector<TuningRecord> tunings;
};

Contents read_and_check(const std::string& file, const ImportChecker& checker) {
  auto refuse = [&](const std::string& why) { return InputError("cannot import " + file + ": " + why); };
  const std::string damaged =
      "it is damaged or not an SQLite file (truncated or overwritten?); nothing was imported, export it again";
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) throw refuse(std::string("no such file (") + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) throw refuse("it is not a regular file");

  Connection c;
  if (sqlite3_open_v2(file.c_str(), &c.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string msg = c.db ? sqlite3_errmsg(c.db) : "out of memory";
    throw refuse("cannot open it read-only (" + msg + ")");
  }
  sqlite3_busy_timeout(c.db, 60000);
  Contents out;
  try {
    sql::exec(c.db, file, "PRAGMA schema_version");  // the first read of the header
    std::map<std::string, bool> tables;
    {
      Stmt s(c.db, "SELECT name FROM sqlite_master WHERE type='table'", file);
      while (s.step()) tables[s.col_text(0)] = true;
    }
    std::string format, version_text;
    if (tables.count("meta")) {
      Stmt s(c.db, "SELECT key, value FROM meta WHERE key IN ('format', 'schema_version')", file);
      while (s.step()) (s.col_text(0) == "format" ? format : version_text) = s.col_text(1);
    }
    if (format != kStoreFormat) {
      throw refuse("it is an SQLite database of something else, not an onecat kernel cache; nothing was imported");
    }
    int version = 0;
    try {
      version = std::stoi(version_text);
    } catch (const std::exception&) {
      throw refuse("its schema version '" + version_text + "' is not a number; " + damaged);
    }
    if (version > kSchemaVersion) {
      throw refuse("it was written by a newer onecat (cache schema " + std::to_string(version) + ", this onecat reads up to " +
                   std::to_string(kSchemaVersion) + "); update onecat to import it");
    }
    if (version < 1 || !tables.count("binaries") || (version >= 2 && !tables.count("tunings"))) {
      throw refuse("it lacks the tables of cache schema " + std::to_string(version) + "; " + damaged);
    }
    {
      Stmt s(c.db, "PRAGMA integrity_check", file);
      while (s.step()) {
        if (s.col_text(0) != "ok") {
          throw refuse("SQLite's integrity check says: " + first_problem(s.col_text(0)) + "; " + damaged);
        }
      }
    }
    {
      Stmt s(c.db, std::string("SELECT ") + sql::kBinaryColumns + ", cubin, cubin_sha256 FROM binaries ORDER BY key", file);
      while (s.step()) {
        KernelBinary b = sql::read_binary(s, true);
        const std::string what = "binary " + b.key.substr(0, 16) + " (" + b.spec + " [" + b.config + "] " + b.arch + ")";
        if (to_hex(sha256(b.cubin)) != s.col_text(16)) {
          throw refuse(what + " does not match its checksum; the file was damaged, nothing was imported, export it again");
        }
        if (const std::string why = binary_inconsistency(b, checker); !why.empty()) {
          throw refuse(what + ": " + why + "; nothing was imported");
        }
        out.binaries.push_back(std::move(b));
      }
    }
    if (version >= 2) {
      Stmt s(c.db, std::string("SELECT ") + sql::kTuningColumns + " FROM tunings ORDER BY key", file);
      while (s.step()) {
        TuningRecord t;
        try {
          t = sql::read_tuning(s);
        } catch (const Error& e) {
          if (damaged_message(e.what())) throw;
          throw refuse("tuning record " + s.col_text(0).substr(0, 16) + ": " + e.what() + "; nothing was imported");
        }
        const std::optional<int> generator = checker.generator_version(t.family);
        if (!generator) {
          throw refuse("it holds tuning records of kernel family '" + t.family +
                       "', which this onecat does not have; nothing was imported");
        }
        if (*generator != t.generator_version) {
          throw refuse("its tuning records of family '" + t.family + "' were made with generator version " +
                       std::to_string(t.generator_version) + ", but this onecat's '" + t.family + "' is generator version " +
                       std::to_string(*generator) + "; nothing was imported, tune on this onecat or export from a matching one");
        }
        if (const std::string why = tuning_inconsistency(t, checker); !why.empty()) {
          throw refuse("tuning record " + t.key.substr(0, 16) + " (" + t.spec.substr(0, 200) + ", bucket " +
                       std::to_string(t.bucket) + "): " + why + "; nothing was imported");
        }
        if (tuning_key(t) != t.key) {
          throw refuse("tuning record " + t.key.substr(0, 16) + " (" + t.spec + ", bucket " + std::to_string(t.bucket) +
                       ") does not match its key; nothing was imported");
        }
        out.tunings.push_back(std::move(t));
      }
    }
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    if (damaged_message(e.what())) throw refuse(damaged);
    throw refuse(first_line(e.what()));
  }
  return out;
}

// The file an export replaces must be a plain file, and never the live store: renaming over
// a device node or FIFO replaces it, and writing over the store under a running compile
// corrupts it.
void check_export_target(const Store& from, const std::string& file) {
  struct stat target {};
  if (lstat(file.c_str(), &target) != 0) return;  // a new file
  if (!S_ISREG(target.st_mode)) {
    throw InputError("cannot export to " + file + ": it exists and is not a regular file (a directory, device, FIFO "
                     "or symbolic link); give the name of a new or plain file");
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    struct stat live {};
    if (stat((from.path() + suffix).c_str(), &live) == 0 && live.st_dev == target.st_dev && live.st_ino == target.st_ino) {
      throw InputError("cannot export to " + file + ": it is the kernel cache being exported (" + from.path() + suffix +
                       "); give another file name");
    }
  }
}

// FILE.tmp-PID (and its -wal, -shm, -journal) of an export whose process is gone: a killed
// export cannot clean up after itself, so the next export to the same file does.
void remove_abandoned_exports(const std::string& file) {
  const size_t slash = file.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash + 1);
  const std::string prefix = (slash == std::string::npos ? file : file.substr(slash + 1)) + ".tmp-";
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    size_t digits = prefix.size();
    while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
    const std::string rest = name.substr(digits);
    if (digits == prefix.size() || digits - prefix.size() > 9 ||
        !(rest.empty() || rest == "-wal" || rest == "-shm" || rest == "-journal")) {
      continue;
    }
    const pid_t pid = pid_t(std::stol(name.substr(prefix.size(), digits - prefix.size())));
    if (pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  for (const auto& name : stale) unlink(((slash == std::string::npos ? "" : dir) + name).c_str());
}

// Removes an export's scratch files when SIGINT, SIGTERM or SIGHUP ends the process midway
// (paths prepared up front: a handler may only call async-signal-safe functions).
class ScratchGuard {
 public:
  explicit ScratchGuard(const std::string& tmp) {
    int i = 0;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::snprintf(paths_[i++], kPathMax, "%s%s", tmp.c_str(), suffix);
    }
    active_ = tmp.size() + 9 < kPathMax;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 3; ++k) sigaction(kSignals[k], &sa, &old_[k]);
  }
  ~ScratchGuard() {
    for (int k = 0; k < 3; ++k) sigaction(kSignals[k], &old_[k], nullptr);
    active_ = false;
  }
  ScratchGuard(const ScratchGuard&) = delete;
  ScratchGuard& operator=(const ScratchGuard&) = delete;

 private:
  static constexpr size_t kPathMax = 4096;
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  static void on_signal(int sig) {
    if (active_) {
      for (auto& p : paths_) unlink(p);
    }
    signal(sig, SIG_DFL);
    raise(sig);
  }
  static inline char paths_[4][kPathMax] = {};
  static inline volatile sig_atomic_t active_ = 0;
  struct sigaction old_[3] {};
};

}  // namespace

int64_t ImportReport::verification_failures() const {
  return std::count_if(verification.begin(), verification.end(), [](const BinaryVerification& v) { return !v.ok; });
}

ExportReport export_cache(const Store& from, const std::string& file, const ExportFilter& filter) {
  std::string arch;
  int sm = 0;
  if (!filter.arch.empty()) {
    const Arch a = Arch::parse(filter.arch);
    arch = a.name();
    sm = a.sm;
  }
  if (file.empty()) throw InputError("cache export needs a file name");
  check_export_target(from, file);
  remove_abandoned_exports(file);
  const std::string tmp = file + ".tmp-" + std::to_string(getpid());
  ExportReport report;
  report.file = file;
  Store::remove_files(tmp);
  ScratchGuard guard(tmp);
  Connection c;
  try {
    { Store created(tmp, Store::Use::kScratch); }  // the schema, through the same migrations as every store
    if (sqlite3_open_v2(tmp.c_str(), &c.db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      throw Error("cannot write " + tmp + ": " + (c.db ? sqlite3_errmsg(c.db) : "out of memory"));
    }
    sqlite3_busy_timeout(c.db, 60000);
    Stmt(c.db, "ATTACH DATABASE ?1 AS src", tmp).text(1, from.path()).step();
    sql::exec(c.db, tmp, "BEGIN");
    {
      Stmt s(c.db, "INSERT INTO main.binaries SELECT * FROM src.binaries WHERE ?1 = '' OR arch = ?1", tmp);
      s.text(1, arch).step();
      report.binaries = sqlite3_changes(c.db);
    }
    {
      Stmt s(c.db,
             "INSERT INTO main.tunings SELECT * FROM src.tunings WHERE (?1 = 0 OR sm = ?1) AND "
             "(?2 = '' OR instr(lower(device_name), lower(?2)) > 0)",
             tmp);
      s.integer(1, sm).text(2, filter.device).step();
      report.tunings = sqlite3_changes(c.db);
    }
    Stmt(c.db,
         "INSERT INTO main.meta(key, value) VALUES('exported_by', ?1), "
         "('exported_at', strftime('%Y-%m-%dT%H:%M:%SZ','now')) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
         tmp)
        .text(1, "onecat (cache schema " + std::to_string(kSchemaVersion) + ")")
        .step();
    sql::exec(c.db, tmp, "COMMIT");
    sql::exec(c.db, tmp, "DETACH DATABASE src");
    // One self-contained file: no WAL beside it.
    sql::exec(c.db, tmp, "PRAGMA journal_mode=DELETE");
    if (sqlite3_close(c.db) != SQLITE_OK) throw Error("cannot finish writing " + tmp + ": " + sqlite3_errmsg(c.db));
    c.db = nullptr;
    if (std::rename(tmp.c_str(), file.c_str()) != 0) {
      throw Error("cannot move " + tmp + " to " + file + ": " + std::strerror(errno));
    }
  } catch (...) {
    c.close();
    Store::remove_files(tmp);
    throw;
  }
  return report;
}

ImportReport import_cache(Store& into, const std::string& file, bool verify, const ImportChecker& checker) {
  into.require_writable("import into it");
  ImportReport report;
  report.file = file;
  Contents contents = read_and_check(file, checker);
  if (verify) {
    report.verified = true;
    for (const auto& b : contents.binaries) report.verification.push_back(checker.verify(b));
    if (report.verification_failures() > 0) return report;  // imported stays false
  }
  sql::exec(into.db_, into.path_, "BEGIN IMMEDIATE");
  try {
    for (const auto& b : contents.binaries) {
      (sql::insert_binary(into.db_, into.path_, b) ? report.binaries_added : report.binaries_present)++;
    }
    for (const auto& t : contents.tunings) {
      (sql::insert_tuning(into.db_, into.path_, t, /*replace=*/false) ? report.tunings_added : report.tunings_present)++;
    }
    sql::exec(into.db_, into.path_, "COMMIT");
  } catch (...) {
    sqlite3_exec(into.db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  report.imported = true;
  return report;
}

}  // namespace onecat
