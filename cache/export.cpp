#include "cache/export.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>

#include "cache/sha256.h"
#include "cache/sql.h"
#include "codegen/arch.h"
#include "codegen/family.h"
#include "runtime/cuda/error.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/compiler.h"

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

bool damaged_message(const std::string& what) {
  for (const char* needle : {"not a database", "malformed", "disk I/O error", "database corrupt", "unable to open"}) {
    if (what.find(needle) != std::string::npos) return true;
  }
  return false;
}

// What an export file holds, read whole and checked before anything is written.
struct Contents {
  std::vector<KernelBinary> binaries;
  std::vector<TuningRecord> tunings;
};

Contents read_and_check(const std::string& file) {
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
        if (s.col_text(0) != "ok") throw refuse("SQLite's integrity check says: " + s.col_text(0) + "; " + damaged);
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
        if (b.cubin.size() < 4 || b.cubin.compare(0, 4, "\x7f" "ELF") != 0) {
          throw refuse(what + " is not an ELF image; nothing was imported");
        }
        out.binaries.push_back(std::move(b));
      }
    }
    if (version >= 2) {
      std::map<std::string, int> generators;
      for (const Family* f : all_families()) generators[std::string(f->name())] = f->generator_version();
      Stmt s(c.db, std::string("SELECT ") + sql::kTuningColumns + " FROM tunings ORDER BY key", file);
      while (s.step()) {
        TuningRecord t;
        try {
          t = sql::read_tuning(s);
        } catch (const Error& e) {
          if (damaged_message(e.what())) throw;
          throw refuse("tuning record " + s.col_text(0).substr(0, 16) + ": " + e.what() + "; nothing was imported");
        }
        auto g = generators.find(t.family);
        if (g == generators.end()) {
          throw refuse("it holds tuning records of kernel family '" + t.family +
                       "', which this onecat does not have; nothing was imported");
        }
        if (g->second != t.generator_version) {
          throw refuse("its tuning records of family '" + t.family + "' were made with generator version " +
                       std::to_string(t.generator_version) + ", but this onecat's '" + t.family + "' is generator version " +
                       std::to_string(g->second) + "; nothing was imported, tune on this onecat or export from a matching one");
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

BinaryVerification verify_binary(const KernelBinary& b) {
  BinaryVerification v;
  v.key = b.key;
  v.spec = b.spec;
  v.config = b.config;
  v.arch = b.arch;
  try {
    const Arch arch = Arch::parse(b.arch);
    const NvrtcLib& nvrtc = NvrtcRegistry::get().for_arch(arch);
    if (nvrtc.version() != b.nvrtc_version) {
      v.detail = "cannot verify: built with NVRTC " + b.nvrtc_version + ", this machine has " + nvrtc.version();
      return v;
    }
    const CompileRequest req = CompileRequest::make(family_of(b.spec), b.spec, b.config, arch);
    const std::string key = binary_key(req, nvrtc.version(), nvrtc_options(arch));
    if (key != b.key) {
      v.detail = "its key differs from the one rebuilt here (" + key.substr(0, 16) +
                 "…): other templates, options or generator";
      return v;
    }
    const KernelBinary fresh = compile_kernel(req, nvrtc);
    if (fresh.cubin != b.cubin) {
      size_t at = 0;
      while (at < fresh.cubin.size() && at < b.cubin.size() && fresh.cubin[at] == b.cubin[at]) ++at;
      v.detail = "the recompiled cubin differs (" + std::to_string(fresh.cubin.size()) + " bytes here, " +
                 std::to_string(b.cubin.size()) + " in the file, first difference at byte " + std::to_string(at) + ")";
      return v;
    }
    v.ok = true;
  } catch (const Error& e) {
    v.detail = "cannot verify: " + first_line(e.what());
  }
  return v;
}

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
  const std::string tmp = file + ".tmp-" + std::to_string(getpid());
  ExportReport report;
  report.file = file;
  Store::remove_files(tmp);
  Connection c;
  try {
    { Store created(tmp); }  // the schema, through the same migrations as every store
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

ImportReport import_cache(Store& into, const std::string& file, bool verify) {
  ImportReport report;
  report.file = file;
  Contents contents = read_and_check(file);
  if (verify) {
    report.verified = true;
    for (const auto& b : contents.binaries) report.verification.push_back(verify_binary(b));
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
