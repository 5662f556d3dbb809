// Internal to cache/: a prepared SQLite statement that throws Error, and the row codecs
// the store and export/import share (one definition of each table's columns).
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "cache/record.h"

namespace onecat::sql {

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("preparing a query");
  }
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) : Stmt(db, sql.c_str(), path) {}
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
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
  bool col_null(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }

 private:
  [[noreturn]] void fail(const char* what) {
    throw Error("kernel cache " + path_ + ": " + sqlite3_errmsg(db_) + " while " + what);
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& path_;
};

// Runs one or more statements; throws Error naming `path`.
void exec(sqlite3* db, const std::string& path, const char* sql);

// binaries: the columns read_binary expects (cubin last), and one upsert that keeps an
// existing row (ON CONFLICT DO NOTHING). insert_binary returns true when a row was written.
extern const char* const kBinaryColumns;  // without cubin
KernelBinary read_binary(const Stmt& s, bool with_cubin);
bool insert_binary(sqlite3* db, const std::string& path, const KernelBinary& b, bool replace = false);

// tunings: columns for read_tuning; insert_tuning replaces (DO UPDATE) or keeps (DO NOTHING)
// an existing row with the same key. Returns true when a row was written.
extern const char* const kTuningColumns;
TuningRecord read_tuning(const Stmt& s);
bool insert_tuning(sqlite3* db, const std::string& path, const TuningRecord& t, bool replace);

// The candidates column: a JSON array of {config, status, median_us, min_us, max_us, detail}.
std::string candidates_to_json(const std::vector<CandidateTiming>& candidates);
// Throws Error when the text is not such an array.
std::vector<CandidateTiming> candidates_from_json(const std::string& text);

}  // namespace onecat::sql
