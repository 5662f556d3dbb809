#include "cache/store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cache/paths.h"
#include "cache/sha256.h"
#include "runtime/cuda/error.h"

namespace onecat {
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
};
static_assert(std::size(kMigrations) == kSchemaVersion);

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("preparing a query");
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt& text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), int(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& blob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), int(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& integer(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& real(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail("reading or writing");
    return false;
  }
  std::string col_text(int i) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    return p ? std::string(p, sqlite3_column_bytes(stmt_, i)) : std::string();
  }
  std::string col_blob(int i) const {
    auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    return p ? std::string(p, sqlite3_column_bytes(stmt_, i)) : std::string();
  }
  int64_t col_int(int i) const { return sqlite3_column_int64(stmt_, i); }
  double col_real(int i) const { return sqlite3_column_double(stmt_, i); }

 private:
  [[noreturn]] void fail(const char* what) {
    throw Error("kernel cache " + path_ + ": " + sqlite3_errmsg(db_) + " while " + what);
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& path_;
};

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

KernelBinary read_row(const Stmt& s, bool with_cubin) {
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

constexpr const char* kRowColumns =
    "key, family, spec, config, arch, nvrtc_version, options, lowered_name, registers, shared_bytes, "
    "spill_store_bytes, spill_load_bytes, stack_bytes, barriers, compile_ms";

}  // namespace

Store::Store(std::string path) : path_(std::move(path)) {
  make_private_dir(parent_dir(path_));
  const bool existed = file_exists(path_);
  if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("cannot open kernel cache " + path_ + ": " + msg);
  }
  if (!existed) chmod(path_.c_str(), 0600);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  try {
    // The first read of the header: a non-SQLite or truncated file fails here.
    exec("PRAGMA schema_version");
    // Changing the journal mode needs a moment alone with the file: retry while busy.
    for (int attempt = 0;; ++attempt) {
      int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if (rc != SQLITE_BUSY || attempt > 600) exec("PRAGMA journal_mode=WAL");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    exec("PRAGMA synchronous=NORMAL");
    migrate();
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    std::string what = e.what();
    if (what.find("not a database") != std::string::npos || what.find("malformed") != std::string::npos) {
      throw Error("kernel cache " + path_ +
                  " is damaged or not an SQLite file (truncated or overwritten?); run `onecat cache clear --force` to "
                  "start a new one, or set ONECAT_CACHE_DIR to use another place");
    }
    throw;
  }
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

void Store::exec(const char* sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw Error("kernel cache " + path_ + ": " + msg);
  }
}

int Store::schema_version() const {
  Stmt s(db_, "SELECT value FROM meta WHERE key='schema_version'", path_);
  return s.step() ? std::stoi(s.col_text(0)) : 0;
}

void Store::migrate() {
  exec("BEGIN IMMEDIATE");
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
    if (!has_meta) {
      exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      Stmt(db_, "INSERT INTO meta VALUES('format', ?1)", path_).text(1, kStoreFormat).step();
      Stmt(db_, "INSERT INTO meta VALUES('schema_version', '0')", path_).step();
    } else {
      version = schema_version();
    }
    if (version > kSchemaVersion) {
      throw Error("kernel cache " + path_ + " has schema " + std::to_string(version) + ", newer than this onecat's " +
                  std::to_string(kSchemaVersion) + "; update onecat or set ONECAT_CACHE_DIR to another place");
    }
    for (int v = version; v < kSchemaVersion; ++v) exec(kMigrations[v]);
    if (version != kSchemaVersion) {
      Stmt(db_, "UPDATE meta SET value=?1 WHERE key='schema_version'", path_).text(1, std::to_string(kSchemaVersion)).step();
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<KernelBinary> Store::find_binary(const std::string& key) const {
  std::string sql = std::string("SELECT ") + kRowColumns + ", cubin FROM binaries WHERE key=?1";
  Stmt s(db_, sql.c_str(), path_);
  s.text(1, key);
  if (!s.step()) return std::nullopt;
  return read_row(s, true);
}

bool Store::put_binary(const KernelBinary& b) {
  Stmt s(db_,
         "INSERT INTO binaries(key, family, spec, config, arch, nvrtc_version, options, cubin, cubin_sha256, "
         "lowered_name, registers, shared_bytes, spill_store_bytes, spill_load_bytes, stack_bytes, barriers, compile_ms) "
         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17) ON CONFLICT(key) DO NOTHING",
         path_);
  s.text(1, b.key).text(2, b.family).text(3, b.spec).text(4, b.config).text(5, b.arch).text(6, b.nvrtc_version);
  s.text(7, b.options).blob(8, b.cubin).text(9, to_hex(sha256(b.cubin))).text(10, b.lowered_name);
  s.integer(11, b.usage.registers).integer(12, b.usage.shared_bytes).integer(13, b.usage.spill_store_bytes);
  s.integer(14, b.usage.spill_load_bytes).integer(15, b.usage.stack_bytes).integer(16, b.usage.barriers);
  s.real(17, b.compile_ms);
  s.step();
  return sqlite3_changes(db_) == 1;
}

std::vector<KernelBinary> Store::list_binaries() const {
  std::string sql = std::string("SELECT ") + kRowColumns + " FROM binaries ORDER BY family, spec, arch, config";
  Stmt s(db_, sql.c_str(), path_);
  std::vector<KernelBinary> out;
  while (s.step()) out.push_back(read_row(s, false));
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
  return v;
}

int64_t Store::clear() {
  exec("BEGIN IMMEDIATE");
  try {
    exec("DELETE FROM binaries");
    int64_t n = sqlite3_changes(db_);
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
