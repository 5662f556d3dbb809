#include "cache/store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/sha256.h"
#include "cache/paths.h"
#include "cache/sql.h"

namespace onecat {
namespace sql {

void exec(sqlite3* db, const std::string& path, const char* text) {
  char* err = nullptr;
  if (sqlite3_exec(db, text, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw Error("kernel cache " + path + ": " + msg);
  }
}

const char* const kBinaryColumns =
    "key, family, spec, config, arch, nvrtc_version, options, lowered_name, registers, shared_bytes, "
    "spill_store_bytes, spill_load_bytes, stack_bytes, barriers, compile_ms";

KernelBinary read_binary(const Stmt& s, bool with_cubin) {
  KernelBinary b;
  b.key = s.col_text(0);
  b.family = s.col_text(1);
  b.spec = s.col_text(2);
  b.config = s.col_text(3);
  b.arch = s.col_text(4);
  b.nvrtc_version = s.col_text(5);
  b.options = s.col_text(6);
  b.lowered_name = s.col_text(7);
  b.usage.registers = int(s.col_int(8));
  b.usage.shared_bytes = int(s.col_int(9));
  b.usage.spill_store_bytes = int(s.col_int(10));
  b.usage.spill_load_bytes = int(s.col_int(11));
  b.usage.stack_bytes = int(s.col_int(12));
  b.usage.barriers = int(s.col_int(13));
  b.compile_ms = s.col_real(14);
  if (with_cubin) b.cubin = s.col_blob(15);
  return b;
}

bool insert_binary(sqlite3* db, const std::string& path, const KernelBinary& b, bool replace) {
  std::string text =
      "INSERT INTO binaries(key, family, spec, config, arch, nvrtc_version, options, cubin, cubin_sha256, "
      "lowered_name, registers, shared_bytes, spill_store_bytes, spill_load_bytes, stack_bytes, barriers, compile_ms) "
      "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17) ON CONFLICT(key) ";
  text += replace ? "DO UPDATE SET family=excluded.family, spec=excluded.spec, config=excluded.config, "
                    "arch=excluded.arch, nvrtc_version=excluded.nvrtc_version, options=excluded.options, "
                    "cubin=excluded.cubin, cubin_sha256=excluded.cubin_sha256, lowered_name=excluded.lowered_name, "
                    "registers=excluded.registers, shared_bytes=excluded.shared_bytes, "
                    "spill_store_bytes=excluded.spill_store_bytes, spill_load_bytes=excluded.spill_load_bytes, "
                    "stack_bytes=excluded.stack_bytes, barriers=excluded.barriers, compile_ms=excluded.compile_ms, "
                    "created_at=strftime('%Y-%m-%dT%H:%M:%SZ','now')"
                  : "DO NOTHING";
  Stmt s(db, text, path);
  s.text(1, b.key).text(2, b.family).text(3, b.spec).text(4, b.config).text(5, b.arch).text(6, b.nvrtc_version);
  s.text(7, b.options).blob(8, b.cubin).text(9, to_hex(sha256(b.cubin))).text(10, b.lowered_name);
  s.integer(11, b.usage.registers).integer(12, b.usage.shared_bytes).integer(13, b.usage.spill_store_bytes);
  s.integer(14, b.usage.spill_load_bytes).integer(15, b.usage.stack_bytes).integer(16, b.usage.barriers);
  s.real(17, b.compile_ms);
  s.step();
  return sqlite3_changes(db) == 1;
}

const char* const kTuningColumns =
    "key, device_name, sm, multiprocessors, driver, nvrtc_version, family, generator_version, spec, bucket, config, "
    "default_config, best_us, default_us, candidates";

namespace {
// NaN is stored as NULL (SQLite has no NaN) and read back as NaN.
double real_or_nan(const Stmt& s, int i) { return s.col_null(i) ? std::nan("") : s.col_real(i); }
double json_number(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::nan("");
  if (!it->is_number()) throw Error(std::string("candidate field ") + name + " is not a number");
  return it->get<double>();
}
std::string json_text(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return "";
  if (!it->is_string()) throw Error(std::string("candidate field ") + name + " is not a string");
  return it->get<std::string>();
}
}  // namespace

TuningRecord read_tuning(const Stmt& s) {
  TuningRecord t;
  t.key = s.col_text(0);
  t.device.name = s.col_text(1);
  t.device.sm = int(s.col_int(2));
  t.device.multiprocessors = int(s.col_int(3));
  t.device.driver = s.col_text(4);
  t.device.nvrtc_version = s.col_text(5);
  t.family = s.col_text(6);
  t.generator_version = int(s.col_int(7));
  t.spec = s.col_text(8);
  t.bucket = s.col_int(9);
  t.config = s.col_text(10);
  t.default_config = s.col_text(11);
  t.best_us = real_or_nan(s, 12);
  t.default_us = real_or_nan(s, 13);
  t.candidates = candidates_from_json(s.col_text(14));
  return t;
}

bool insert_tuning(sqlite3* db, const std::string& path, const TuningRecord& t, bool replace) {
  std::string text = std::string("INSERT INTO tunings(") + kTuningColumns +
                     ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15) ON CONFLICT(key) ";
  text += replace ? "DO UPDATE SET device_name=excluded.device_name, sm=excluded.sm, "
                    "multiprocessors=excluded.multiprocessors, driver=excluded.driver, "
                    "nvrtc_version=excluded.nvrtc_version, family=excluded.family, "
                    "generator_version=excluded.generator_version, spec=excluded.spec, bucket=excluded.bucket, "
                    "config=excluded.config, default_config=excluded.default_config, best_us=excluded.best_us, "
                    "default_us=excluded.default_us, candidates=excluded.candidates, "
                    "created_at=strftime('%Y-%m-%dT%H:%M:%SZ','now')"
                  : "DO NOTHING";
  Stmt s(db, text, path);
  s.text(1, t.key.empty() ? tuning_key(t) : t.key).text(2, t.device.name).integer(3, t.device.sm);
  s.integer(4, t.device.multiprocessors).text(5, t.device.driver).text(6, t.device.nvrtc_version);
  s.text(7, t.family).integer(8, t.generator_version).text(9, t.spec).integer(10, t.bucket).text(11, t.config);
  s.text(12, t.default_config).real(13, t.best_us).real(14, t.default_us).text(15, candidates_to_json(t.candidates));
  s.step();
  return sqlite3_changes(db) == 1;
}

std::string candidates_to_json(const std::vector<CandidateTiming>& candidates) {
  nlohmann::json out = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& c : candidates) {
    out.push_back({{"config", c.config}, {"status", c.status}, {"median_us", num(c.median_us)},
                   {"min_us", num(c.min_us)}, {"max_us", num(c.max_us)}, {"detail", c.detail}});
  }
  return out.dump();
}

std::vector<CandidateTiming> candidates_from_json(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error("candidates are not valid JSON");
  if (!j.is_array()) throw Error("candidates are not a JSON array");
  std::vector<CandidateTiming> out;
  for (const auto& c : j) {
    if (!c.is_object()) throw Error("a candidate is not a JSON object");
    CandidateTiming t;
    t.config = json_text(c, "config");
    t.status = json_text(c, "status");
    t.median_us = json_number(c, "median_us");
    t.min_us = json_number(c, "min_us");
    t.max_us = json_number(c, "max_us");
    t.detail = json_text(c, "detail");
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace sql

using sql::Stmt;

std::string tuning_key(const DeviceFingerprint& device, const std::string& family, int generator_version,
                       const std::string& spec, int64_t bucket) {
  Sha256 h;
  h.field("onecat-tuning-key-v1");
  h.field(device.name).field(std::to_string(device.sm)).field(std::to_string(device.multiprocessors));
  h.field(device.driver).field(device.nvrtc_version);
  h.field(family).field(std::to_string(generator_version)).field(spec).field(std::to_string(bucket));
  return to_hex(h.finish());
}

std::string tuning_key(const TuningRecord& t) {
  return tuning_key(t.device, t.family, t.generator_version, t.spec, t.bucket);
}

namespace {

// Long enough for another process to finish a compile-and-insert burst.
constexpr int kBusyTimeoutMs = 60000;

// migrations[v] takes a store from schema v to v+1.
const char* const kMigrations[] = {
    R"SQL(
CREATE TABLE binaries(
  key TEXT PRIMARY KEY,
  family TEXT NOT NULL,
  spec TEXT NOT NULL,
  config TEXT NOT NULL,
  arch TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL,
  options TEXT NOT NULL,
  cubin BLOB NOT NULL,
  cubin_sha256 TEXT NOT NULL,
  lowered_name TEXT NOT NULL,
  registers INTEGER NOT NULL,
  shared_bytes INTEGER NOT NULL,
  spill_store_bytes INTEGER NOT NULL,
  spill_load_bytes INTEGER NOT NULL,
  stack_bytes INTEGER NOT NULL,
  barriers INTEGER NOT NULL,
  compile_ms REAL NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
);
CREATE INDEX binaries_by_spec ON binaries(family, spec, arch);
)SQL",
    R"SQL(
CREATE TABLE tunings(
  key TEXT PRIMARY KEY,
  device_name TEXT NOT NULL,
  sm INTEGER NOT NULL,
  multiprocessors INTEGER NOT NULL,
  driver TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL,
  family TEXT NOT NULL,
  generator_version INTEGER NOT NULL,
  spec TEXT NOT NULL,
  bucket INTEGER NOT NULL,
  config TEXT NOT NULL,
  default_config TEXT NOT NULL,
  best_us REAL,
  default_us REAL,
  candidates TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
);
CREATE INDEX tunings_by_spec ON tunings(family, spec, bucket);
)SQL",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

namespace {

bool writable(const std::string& path) { return access(path.c_str(), W_OK) == 0; }

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
  return buf;
}

// ssh's rule for its keys: a cache that another user can write (or owns) could hand this
// process a planted cubin, and a cubin runs with the caller's rights on the GPU.
void check_trusted(const std::string& dir, const std::string& file) {
  std::vector<std::string> problems;
  auto look = [&](const std::string& path, const char* what) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return;
    if (st.st_uid != geteuid() && st.st_uid != 0) {
      problems.push_back(std::string(what) + " " + path + " belongs to another user (uid " + std::to_string(st.st_uid) + ")");
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
      problems.push_back(std::string(what) + " " + path + " is writable by other users (mode " + mode_text(st.st_mode) + ")");
    }
  };
  if (!dir.empty()) look(dir, "kernel cache directory");
  look(file, "kernel cache");
  for (const char* suffix : {"-wal", "-shm"}) look(file + suffix, "kernel cache file");
  if (problems.empty()) return;
  const std::string why = problems.front() + ": a kernel planted there would run on your GPU";
  if (const char* allow = std::getenv("ONECAT_ALLOW_SHARED_CACHE"); allow && std::string(allow) == "1") {
    static bool warned = false;
    if (!warned) std::fprintf(stderr, "onecat: warning: %s (allowed by ONECAT_ALLOW_SHARED_CACHE=1)\n", why.c_str());
    warned = true;
    return;
  }
  throw Error(why + "; make it yours and private (chown, chmod go-w), use another ONECAT_CACHE_DIR, or set "
                    "ONECAT_ALLOW_SHARED_CACHE=1 to use it anyway");
}

}  // namespace

Store::Store(std::string path, Use use) : path_(std::move(path)) {
  const std::string dir = parent_dir(path_);
  make_private_dir(dir);
  if (use == Use::kCache) check_trusted(dir, path_);
  const bool existed = file_exists(path_);
  // A store this process cannot write (a shared, read-only fleet cache) serves lookups.
  read_only_ = existed && (!writable(path_) || (!dir.empty() && !writable(dir)));
  if (!read_only_) {
    for (const char* suffix : {"-wal", "-shm"}) {
      const std::string companion = path_ + suffix;
      if (file_exists(companion) && !writable(companion)) {
        throw Error("kernel cache file " + companion + " is not writable by this user (left by another user?), so " +
                    path_ + " cannot be opened; remove " + companion + " or fix its permissions");
      }
    }
  }
  std::string open_error;
  auto open = [&](const std::string& name, int flags) {
    if (sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_FULLMUTEX, nullptr) == SQLITE_OK) return true;
    open_error = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    return false;
  };
  bool opened = read_only_ ? open(path_, SQLITE_OPEN_READONLY)
                           : open(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (read_only_ && opened && sqlite3_exec(db_, "PRAGMA schema_version", nullptr, nullptr, nullptr) != SQLITE_OK) {
    // A WAL store in a directory we cannot write whose -shm is missing: SQLite can only read
    // it as immutable, which is right for a read-only mount nobody writes.
    sqlite3_close(db_);
    db_ = nullptr;
    opened = open("file:" + path_ + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  }
  if (!opened) {
    throw Error("cannot open kernel cache " + path_ + ": " + open_error +
                "; check its permissions or set ONECAT_CACHE_DIR to another place");
  }
  if (!existed) chmod(path_.c_str(), 0600);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  try {
    // The first read of the header: a non-SQLite or truncated file fails here.
    exec("PRAGMA schema_version");
    if (read_only_) {
      check_format_and_version(/*migrate=*/false);
      return;
    }
    // Changing the journal mode needs a moment alone with the file: retry while busy.
    for (int attempt = 0;; ++attempt) {
      int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if (rc != SQLITE_BUSY || attempt > 600) exec("PRAGMA journal_mode=WAL");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    exec("PRAGMA synchronous=NORMAL");
    check_format_and_version(/*migrate=*/true);
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    std::string what = e.what();
    if (what.find("not a database") != std::string::npos || what.find("malformed") != std::string::npos) {
      throw Error("kernel cache " + path_ +
                  " is damaged or not an SQLite file (truncated or overwritten?); run `onecat cache clear --force` to "
                  "start a new one, or set ONECAT_CACHE_DIR to use another place");
    }
    if (what.find("readonly") != std::string::npos || what.find("read-only") != std::string::npos) {
      throw Error("kernel cache " + path_ + " cannot be written (" + what +
                  "); check the permissions of it, its -wal and -shm files and its directory");
    }
    throw;
  }
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

void Store::exec(const char* text) const { sql::exec(db_, path_, text); }

std::optional<int> parse_schema_version(const std::string& text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

int Store::schema_version() const {
  Stmt s(db_, "SELECT value FROM meta WHERE key='schema_version'", path_);
  if (!s.step()) return 0;
  return parse_schema_version(s.col_text(0)).value_or(-1);
}

void Store::check_format_and_version(bool migrate) {
  if (migrate) exec("BEGIN IMMEDIATE");
  try {
    bool has_meta = false, has_other = false;
    {
      Stmt s(db_, "SELECT name FROM sqlite_master WHERE type='table'", path_);
      while (s.step()) (s.col_text(0) == "meta" ? has_meta : has_other) = true;
    }
    int version = 0;
    if (has_meta) {
      Stmt s(db_, "SELECT value FROM meta WHERE key='format'", path_);
      if (!s.step() || s.col_text(0) != kStoreFormat) has_other = true, has_meta = false;
    }
    if (!has_meta && has_other) {
      throw Error("kernel cache " + path_ + " is an SQLite database of something else, not an onecat kernel cache; "
                  "set ONECAT_CACHE_DIR to another place or move the file away");
    }
    if (has_meta) {
      Stmt s(db_, "SELECT value FROM meta WHERE key='schema_version'", path_);
      const std::string text = s.step() ? s.col_text(0) : "";
      const std::optional<int> parsed = parse_schema_version(text);
      if (!parsed || *parsed > kSchemaVersion) {
        throw Error("kernel cache " + path_ + " has schema '" + text.substr(0, 32) + "', which this onecat (schema " +
                    std::to_string(kSchemaVersion) +
                    ") cannot read (newer than this onecat, or damaged); update onecat or set ONECAT_CACHE_DIR to "
                    "another place");
      }
      version = *parsed;
    }
    if (!migrate) {
      if (!has_meta || version != kSchemaVersion) {
        throw Error("kernel cache " + path_ + " is read-only here and has schema " + std::to_string(version) +
                    ", not this onecat's " + std::to_string(kSchemaVersion) +
                    "; open it once where it is writable to migrate it, or set ONECAT_CACHE_DIR to another place");
      }
      return;
    }
    if (!has_meta) {
      exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      Stmt(db_, "INSERT INTO meta VALUES('format', ?1)", path_).text(1, kStoreFormat).step();
      Stmt(db_, "INSERT INTO meta VALUES('schema_version', '0')", path_).step();
    }
    for (int v = version; v < kSchemaVersion; ++v) exec(kMigrations[v]);
    if (version != kSchemaVersion) {
      Stmt(db_, "UPDATE meta SET value=?1 WHERE key='schema_version'", path_).text(1, std::to_string(kSchemaVersion)).step();
    }
    exec("COMMIT");
  } catch (...) {
    if (migrate) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<KernelBinary> Store::find_binary(const std::string& key) const {
  std::string text = std::string("SELECT ") + sql::kBinaryColumns + ", cubin, cubin_sha256 FROM binaries WHERE key=?1";
  Stmt s(db_, text, path_);
  s.text(1, key);
  if (!s.step()) return std::nullopt;
  KernelBinary b = sql::read_binary(s, true);
  // Hashing a cubin costs far less than loading it, and a damaged or planted one must never run.
  if (to_hex(sha256(b.cubin)) != s.col_text(16)) {
    throw CorruptEntry("kernel cache " + path_ + ": entry " + key + " (" + b.spec + " [" + b.config + "] " + b.arch +
                       ") does not match its checksum");
  }
  return b;
}

bool Store::put_binary(const KernelBinary& b) { return !read_only_ && sql::insert_binary(db_, path_, b, false); }

void Store::replace_binary(const KernelBinary& b) {
  if (!read_only_) sql::insert_binary(db_, path_, b, true);
}

std::vector<KernelBinary> Store::list_binaries() const {
  std::string text = std::string("SELECT ") + sql::kBinaryColumns + " FROM binaries ORDER BY family, spec, arch, config";
  Stmt s(db_, text, path_);
  std::vector<KernelBinary> out;
  while (s.step()) out.push_back(sql::read_binary(s, false));
  return out;
}

bool Store::put_tuning(const TuningRecord& record) {
  require_writable("write a tuning record");
  const std::string key = record.key.empty() ? tuning_key(record) : record.key;
  bool existed = false;
  {
    Stmt s(db_, "SELECT 1 FROM tunings WHERE key=?1", path_);
    s.text(1, key);
    existed = s.step();
  }
  TuningRecord keyed = record;
  keyed.key = key;
  sql::insert_tuning(db_, path_, keyed, /*replace=*/true);
  return !existed;
}

std::optional<TuningRecord> Store::find_tuning(const std::string& key) const {
  std::string text = std::string("SELECT ") + sql::kTuningColumns + " FROM tunings WHERE key=?1";
  Stmt s(db_, text, path_);
  s.text(1, key);
  if (!s.step()) return std::nullopt;
  try {
    return sql::read_tuning(s);
  } catch (const Error& e) {
    throw Error("kernel cache " + path_ + ": tuning record " + key + ": " + e.what() + "; run `onecat cache verify`");
  }
}

std::vector<TuningRecord> Store::list_tunings() const {
  std::string text =
      std::string("SELECT ") + sql::kTuningColumns + " FROM tunings ORDER BY family, spec, bucket, device_name, key";
  Stmt s(db_, text, path_);
  std::vector<TuningRecord> out;
  while (s.step()) {
    try {
      out.push_back(sql::read_tuning(s));
    } catch (const Error& e) {
      throw Error("kernel cache " + path_ + ": tuning record " + s.col_text(0) + ": " + e.what() +
                  "; run `onecat cache verify`");
    }
  }
  return out;
}

Store::Stats Store::stats() const {
  Stats st;
  Stmt s(db_, "SELECT family, arch, count(*), sum(length(cubin)) FROM binaries GROUP BY family, arch", path_);
  while (s.step()) {
    st.by_family[s.col_text(0)] += s.col_int(2);
    st.by_arch[s.col_text(1)] += s.col_int(2);
    st.binaries += s.col_int(2);
    st.cubin_bytes += s.col_int(3);
  }
  {
    Stmt t(db_, "SELECT count(*) FROM tunings", path_);
    if (t.step()) st.tunings = t.col_int(0);
  }
  struct stat fs {};
  for (const char* suffix : {"", "-wal"}) {
    if (stat((path_ + suffix).c_str(), &fs) == 0) st.file_bytes += fs.st_size;
  }
  return st;
}

Store::Verification Store::verify() const {
  Verification v;
  {
    Stmt s(db_, "PRAGMA integrity_check", path_);
    while (s.step()) {
      if (s.col_text(0) != "ok") v.problems.push_back("SQLite integrity: " + s.col_text(0));
    }
  }
  if (schema_version() != kSchemaVersion) v.problems.push_back("schema version is not " + std::to_string(kSchemaVersion));
  Stmt s(db_, "SELECT key, cubin, cubin_sha256, lowered_name FROM binaries", path_);
  while (s.step()) {
    ++v.checked;
    std::string key = s.col_text(0), cubin = s.col_blob(1);
    if (to_hex(sha256(cubin)) != s.col_text(2)) v.problems.push_back(key + ": cubin does not match its checksum");
    if (cubin.size() < 4 || cubin.compare(0, 4, "\x7f" "ELF") != 0) v.problems.push_back(key + ": cubin is not an ELF image");
    if (s.col_text(3).empty()) v.problems.push_back(key + ": no lowered kernel name");
  }
  Stmt t(db_, (std::string("SELECT ") + sql::kTuningColumns + " FROM tunings").c_str(), path_);
  while (t.step()) {
    ++v.tunings_checked;
    const std::string key = t.col_text(0);
    try {
      TuningRecord r = sql::read_tuning(t);
      if (tuning_key(r) != key) v.problems.push_back("tuning " + key + ": key does not match its fields");
    } catch (const Error& e) {
      v.problems.push_back("tuning " + key + ": " + e.what());
    }
  }
  return v;
}

void Store::require_writable(const char* what) const {
  if (read_only_) {
    throw Error("kernel cache " + path_ + " is read-only for this user, so onecat cannot " + what +
                "; set ONECAT_CACHE_DIR to a writable place");
  }
}

int64_t Store::clear(int64_t* tunings_removed) {
  require_writable("clear it");
  exec("BEGIN IMMEDIATE");
  try {
    exec("DELETE FROM binaries");
    int64_t n = sqlite3_changes(db_);
    exec("DELETE FROM tunings");
    if (tunings_removed) *tunings_removed = sqlite3_changes(db_);
    exec("COMMIT");
    return n;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void Store::remove_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
}

}  // namespace onecat
