// The SQLite kernel store: round trips, listing, statistics, verification, damaged and
// foreign files, schema versions, and many processes writing at once.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/sha256.h"
#include "cache/paths.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/jit/compiler.h"
#include "runtime/jit/service.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::contains;
using test::expect_throw;
using test::TempDir;

using test::fake_cubin;
using test::make_binary;

void expect_same(const KernelBinary& got, const KernelBinary& want, bool with_cubin) {
  EXPECT_EQ(got.key, want.key);
  EXPECT_EQ(got.family, want.family);
  EXPECT_EQ(got.spec, want.spec);
  EXPECT_EQ(got.config, want.config);
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.nvrtc_version, want.nvrtc_version);
  EXPECT_EQ(got.options, want.options);
  EXPECT_EQ(got.lowered_name, want.lowered_name);
  EXPECT_EQ(got.usage.registers, want.usage.registers);
  EXPECT_EQ(got.usage.shared_bytes, want.usage.shared_bytes);
  EXPECT_EQ(got.usage.spill_store_bytes, want.usage.spill_store_bytes);
  EXPECT_EQ(got.usage.spill_load_bytes, want.usage.spill_load_bytes);
  EXPECT_EQ(got.usage.stack_bytes, want.usage.stack_bytes);
  EXPECT_EQ(got.usage.barriers, want.usage.barriers);
  EXPECT_DOUBLE_EQ(got.compile_ms, want.compile_ms);
  if (with_cubin) {
    EXPECT_EQ(got.cubin, want.cubin);
  } else {
    EXPECT_TRUE(got.cubin.empty());
  }
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

using test::raw_sql;

// A store with `n` rows, closed again.
void fill_store(const std::string& path, int n, size_t cubin_size = 600) {
  Store s(path);
  for (int i = 0; i < n; ++i) ASSERT_TRUE(s.put_binary(make_binary("key" + std::to_string(i), "sm_70", 4096, cubin_size)));
}

TEST(Store, CreatesPrivateDirectoriesAndFile) {
  TempDir tmp;
  const std::string dir = tmp / "deep/er";
  const std::string path = dir + "/kernels.sqlite";
  {
    Store s(path);
    EXPECT_EQ(s.path(), path);
  }
  EXPECT_EQ(mode_of(tmp / "deep"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(path), 0600u);
}

TEST(Store, CacheDirFollowsTheEnvironment) {
  TempDir tmp;
  {
    test::ScopedEnv env("ONECAT_CACHE_DIR", tmp / "c");
    EXPECT_EQ(cache_dir(), tmp / "c");
    EXPECT_EQ(cache_file(), tmp / "c/kernels.sqlite");
  }
  test::ScopedEnv unset("ONECAT_CACHE_DIR", std::nullopt);
  test::ScopedEnv xdg("XDG_CACHE_HOME", tmp / "xdg");
  EXPECT_EQ(cache_dir(), tmp / "xdg/onecat");
}

TEST(Store, PutFindRoundTripsEveryField) {
  TempDir tmp;
  Store s(tmp / "kernels.sqlite");
  EXPECT_EQ(s.schema_version(), kSchemaVersion);
  EXPECT_FALSE(s.find_binary("nope").has_value());

  KernelBinary b = make_binary("abc123");
  b.cubin.push_back('\0');  // cubins hold NUL bytes: stored as a blob, not text
  b.cubin += "tail";
  EXPECT_TRUE(s.put_binary(b));
  auto got = s.find_binary("abc123");
  ASSERT_TRUE(got.has_value());
  expect_same(*got, b, true);

  // A second put of the same key keeps the first row.
  KernelBinary other = make_binary("abc123", "sm_90");
  other.usage.registers = 99;
  EXPECT_FALSE(s.put_binary(other));
  auto again = s.find_binary("abc123");
  ASSERT_TRUE(again.has_value());
  expect_same(*again, b, true);
}

TEST(Store, ListStatsVerifyClearAndReopen) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  std::vector<KernelBinary> rows = {make_binary("k1", "sm_90", 8192, 100), make_binary("k2", "sm_70", 4096, 200),
                                    make_binary("k3", "sm_70", 1024, 300)};
  rows[2].family = "afamily";  // sorts first
  {
    Store s(path);
    for (const auto& b : rows) EXPECT_TRUE(s.put_binary(b));

    auto listed = s.list_binaries();
    ASSERT_EQ(listed.size(), 3u);
    // Ordered by family, spec, arch, config.
    expect_same(listed[0], rows[2], false);
    expect_same(listed[1], rows[1], false);  // hidden=4096 < hidden=8192 as text
    expect_same(listed[2], rows[0], false);

    Store::Stats st = s.stats();
    EXPECT_EQ(st.binaries, 3);
    EXPECT_EQ(st.cubin_bytes, 600);
    EXPECT_GT(st.file_bytes, 0);
    EXPECT_EQ(st.by_arch, (std::map<std::string, int64_t>{{"sm_70", 2}, {"sm_90", 1}}));
    EXPECT_EQ(st.by_family, (std::map<std::string, int64_t>{{"afamily", 1}, {"rmsnorm", 2}}));

    Store::Verification v = s.verify();
    EXPECT_EQ(v.checked, 3);
    EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  }
  {
    Store s(path);  // reopening keeps everything
    EXPECT_EQ(s.schema_version(), kSchemaVersion);
    EXPECT_EQ(s.list_binaries().size(), 3u);
    auto k2 = s.find_binary("k2");
    ASSERT_TRUE(k2.has_value());
    expect_same(*k2, rows[1], true);

    EXPECT_EQ(s.clear(), 3);
    EXPECT_TRUE(s.list_binaries().empty());
    EXPECT_EQ(s.stats().binaries, 0);
    EXPECT_TRUE(s.stats().by_arch.empty());
    EXPECT_EQ(s.verify().checked, 0);
    EXPECT_TRUE(s.verify().problems.empty());
    EXPECT_EQ(s.clear(), 0);
    EXPECT_TRUE(s.put_binary(rows[0]));  // usable after clear
  }
  Store s(path);
  EXPECT_EQ(s.list_binaries().size(), 1u);
}

TEST(Store, MetaTableRecordsFormatAndSchema) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  { Store s(path); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT key, value FROM meta ORDER BY key", -1, &st, nullptr), SQLITE_OK);
  std::map<std::string, std::string> meta;
  while (sqlite3_step(st) == SQLITE_ROW) {
    meta[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] =
        reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
  EXPECT_EQ(meta["format"], kStoreFormat);
  EXPECT_EQ(meta["schema_version"], std::to_string(kSchemaVersion));
}

// Truncates a closed store to `size` bytes and drops its WAL and SHM files.
void truncate_store(const std::string& path, uintmax_t size) {
  std::filesystem::resize_file(path, size);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}

TEST(Store, TruncatedFileIsReportedAsDamaged) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  fill_store(path, 40, 3000);  // ~120 KB of cubins: the rows live far past byte 1000
  ASSERT_GT(std::filesystem::file_size(path), 100000u);
  ASSERT_FALSE(std::filesystem::exists(path + "-wal")) << "the last close checkpoints the WAL";
  truncate_store(path, 1000);
  expect_throw<Error>([&] { Store s(path); },
                      {"is damaged or not an SQLite file", "truncated or overwritten", path, "onecat cache clear --force"});
}

TEST(Store, TruncatedMidwayIsNeverSilentlyClean) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  fill_store(path, 40, 3000);
  const uintmax_t full = std::filesystem::file_size(path);
  for (uintmax_t size : {full / 2, full - 4096}) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " of " + std::to_string(full) + " bytes");
    const std::string copy = tmp / ("copy" + std::to_string(size) + ".sqlite");
    std::filesystem::copy_file(path, copy);
    truncate_store(copy, size);
    // Either opening fails with the damaged-file sentence, or the store opens and verify()
    // reports the damage; never a clean bill of health.
    try {
      Store s(copy);
      Store::Verification v = s.verify();
      EXPECT_FALSE(v.problems.empty()) << "a truncated store verified clean";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "is damaged or not an SQLite file") || contains(e.what(), "malformed")) << e.what();
    }
  }
}

TEST(Store, RandomBytesAreNotAStore) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  std::mt19937 rng(3);
  std::string junk(8192, '\0');
  for (auto& c : junk) c = char(rng());
  test::write_file(path, junk);
  expect_throw<Error>([&] { Store s(path); }, {"is damaged or not an SQLite file", path, "cache clear --force"});
  EXPECT_EQ(test::read_file(path), junk) << "a damaged file is left alone";

  // A short text file too.
  test::write_file(path, "hello, I am not a database\n");
  expect_throw<Error>([&] { Store s(path); }, {"is damaged or not an SQLite file"});

  // remove_files deletes it so a fresh store can start.
  Store::remove_files(path);
  EXPECT_FALSE(std::filesystem::exists(path));
  Store s(path);
  EXPECT_EQ(s.schema_version(), kSchemaVersion);
}

TEST(Store, ForeignSqliteDatabaseIsRejected) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  raw_sql(path, "CREATE TABLE foo(x INTEGER); INSERT INTO foo VALUES(1);");
  expect_throw<Error>([&] { Store s(path); }, {"not an onecat kernel cache", path});
  // Not touched: foo is still there and no onecat tables were added.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT group_concat(name) FROM sqlite_master WHERE type='table'", -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))), "foo");
  sqlite3_finalize(st);
  sqlite3_close(db);

  // A meta table of another program is foreign too.
  const std::string other = tmp / "other.sqlite";
  raw_sql(other, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES('format','x');");
  expect_throw<Error>([&] { Store s(other); }, {"not an onecat kernel cache"});
}

TEST(Store, NewerSchemaIsRejected) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  fill_store(path, 2);
  raw_sql(path, "UPDATE meta SET value='" + std::to_string(kSchemaVersion + 5) + "' WHERE key='schema_version'");
  expect_throw<Error>([&] { Store s(path); },
                      {"newer than this onecat", "schema '" + std::to_string(kSchemaVersion + 5) + "'", "update onecat"});
}

// Any schema_version this onecat cannot read is the same clear error as a future one: no
// negative index into the migrations, no uncaught number parse.
TEST(Store, UnreadableSchemaVersionsAreOneClearError) {
  for (const std::string bad : {"-1", "-1000", "abc", "", "99999999999", " 2", "2.0", "0x2"}) {
    SCOPED_TRACE("schema_version '" + bad + "'");
    TempDir tmp;
    const std::string path = tmp / "kernels.sqlite";
    fill_store(path, 1);
    raw_sql(path, "UPDATE meta SET value='" + bad + "' WHERE key='schema_version'");
    expect_throw<Error>([&] { Store s(path); }, {"has schema '" + bad + "'", "cannot read", "update onecat"});
    const test::CommandResult r =
        test::run_command("ONECAT_CACHE_DIR='" + tmp.path() + "' '" + std::string(ONECAT_BIN) + "' cache stats", tmp.path());
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(r.err.starts_with("onecat: error: kernel cache")) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

TEST(Store, VerifyFindsAFlippedCubinByte) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  fill_store(path, 3);
  // Flip one byte in the middle of key1's cubin with plain SQL; its stored checksum stays.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string flipped = fake_cubin("key1");
    flipped[300] = char(flipped[300] ^ 0x01);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE binaries SET cubin=?1 WHERE key='key1'", -1, &st, nullptr), SQLITE_OK);
    sqlite3_bind_blob(st, 1, flipped.data(), int(flipped.size()), SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }
  Store s(path);
  // A lookup never hands out the damaged cubin: it names the entry instead.
  expect_throw<CorruptEntry>([&] { s.find_binary("key1"); }, {"entry key1", "does not match its checksum"});
  EXPECT_EQ(s.find_binary("key0")->cubin, fake_cubin("key0"));

  Store::Verification v = s.verify();
  EXPECT_EQ(v.checked, 3);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_TRUE(contains(v.problems[0], "key1")) << v.problems[0];
  EXPECT_TRUE(contains(v.problems[0], "checksum")) << v.problems[0];
}

TEST(Store, VerifyFindsNonElfAndNamelessRows) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  {
    Store s(path);
    KernelBinary not_elf = make_binary("notelf");
    not_elf.cubin = "MZ this is not an ELF image";
    EXPECT_TRUE(s.put_binary(not_elf));
    KernelBinary nameless = make_binary("nameless");
    nameless.lowered_name.clear();
    EXPECT_TRUE(s.put_binary(nameless));
    EXPECT_TRUE(s.put_binary(make_binary("fine")));
  }
  Store s(path);
  Store::Verification v = s.verify();
  EXPECT_EQ(v.checked, 3);
  ASSERT_EQ(v.problems.size(), 2u);
  std::string all = v.problems[0] + "\n" + v.problems[1];
  EXPECT_TRUE(contains(all, "notelf: cubin is not an ELF image")) << all;
  EXPECT_TRUE(contains(all, "nameless: no lowered kernel name")) << all;
}

// A cache hit checks the cubin against its checksum: a damaged entry is reported by key,
// recompiled and replaced, and the damaged bytes are never handed to the driver.
TEST(Store, ADamagedEntryIsRecompiledNeverLoaded) {
  test::ScopedEnv nvrtc("ONECAT_NVRTC", std::nullopt);
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  const std::string spec = "rmsnorm:hidden=4096,dtype=f16,residual=1";
  const Family& f = family_of(spec);
  const CompileRequest req = CompileRequest::make(f, spec, f.default_config(spec, 1, Arch{70}), Arch{70});
  Store store(path);
  JitService jit(&store);
  const KernelBinary good = jit.get(req).binary;
  ASSERT_TRUE(jit.get(req).cache_hit);
  std::string damaged = good.cubin;
  damaged[damaged.size() / 2] = char(damaged[damaged.size() / 2] ^ 0x40);
  std::string hex;
  for (unsigned char c : damaged) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
  raw_sql(path, "UPDATE binaries SET cubin=X'" + hex + "' WHERE key='" + good.key + "'");
  expect_throw<CorruptEntry>([&] { store.find_binary(good.key); }, {good.key, "does not match its checksum"});

  const CompileResult again = jit.get(req);
  EXPECT_FALSE(again.cache_hit) << "a damaged entry must be recompiled";
  EXPECT_EQ(again.binary.cubin, good.cubin);
  EXPECT_EQ(store.find_binary(good.key)->cubin, good.cubin) << "the good binary replaced the damaged row";
  EXPECT_TRUE(jit.get(req).cache_hit);
  EXPECT_TRUE(store.verify().problems.empty());
}

// Runs fn in a child process as the unprivileged user (root) or as this user, and returns
// what it wrote to `report` (or the reason it failed).
std::string in_child(const std::function<std::string()>& fn, bool as_nobody) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      if (as_nobody && (setgid(65534) != 0 || setuid(65534) != 0)) throw std::runtime_error("setuid failed");
      out = fn();
    } catch (const std::exception& e) {
      out = std::string("threw: ") + e.what();
    }
    if (write(fds[1], out.data(), out.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

// A fleet may mount a shared cache read-only: lookups are served from it, writes are skipped
// or refused with a sentence, never a failure of every command.
TEST(Store, AReadOnlyCacheServesHits) {
  TempDir tmp;
  const std::string dir = tmp / "shared", path = dir + "/kernels.sqlite";
  fill_store(path, 3);
  const bool root = geteuid() == 0;
  chmod(tmp.path().c_str(), 0755);
  chmod(dir.c_str(), 0555);
  chmod(path.c_str(), 0444);
  const std::string report = in_child(
      [&] {
        Store s(path);
        std::string out = s.read_only() ? "read-only" : "writable";
        out += " hit=" + std::to_string(s.find_binary("key1").has_value());
        out += " put=" + std::to_string(s.put_binary(make_binary("new")));
        out += " listed=" + std::to_string(s.list_binaries().size());
        try {
          s.clear();
        } catch (const Error& e) {
          out += std::string(" clear: ") + e.what();
        }
        return out;
      },
      root);
  chmod(dir.c_str(), 0700);
  EXPECT_TRUE(contains(report, "read-only hit=1 put=0 listed=3 clear: kernel cache " + path + " is read-only")) << report;
}

// A -shm left behind by another user blocks the store: the error names that file.
TEST(Store, AnUnwritableCompanionFileIsNamed) {
  TempDir tmp;
  const std::string dir = tmp / "c", path = dir + "/kernels.sqlite", shm = path + "-shm";
  fill_store(path, 1);
  test::write_file(shm, std::string(32768, '\0'));
  const bool root = geteuid() == 0;
  chmod(tmp.path().c_str(), 0755);
  if (root) {
    // The cache is the unprivileged user's; the -shm stays root's (root is a trusted owner).
    for (const std::string& p : {dir, path}) ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0);
  }
  chmod(shm.c_str(), 0444);
  const std::string report = in_child([&] { Store s(path); return std::string("opened"); }, root);
  EXPECT_TRUE(contains(report, "threw: kernel cache file " + shm + " is not writable")) << report;
}

// ssh's rule: a cache another user owns or can write could plant a cubin that runs here.
TEST(Store, RefusesACacheOthersCanWrite) {
  TempDir tmp;
  const std::string dir = tmp / "c", path = dir + "/kernels.sqlite";
  fill_store(path, 1);
  test::ScopedEnv allow("ONECAT_ALLOW_SHARED_CACHE", std::nullopt);
  chmod(dir.c_str(), 0777);
  expect_throw<Error>([&] { Store s(path); }, {"kernel cache directory " + dir, "writable by other users (mode 0777)",
                                               "ONECAT_ALLOW_SHARED_CACHE=1"});
  chmod(dir.c_str(), 0700);
  chmod(path.c_str(), 0662);
  expect_throw<Error>([&] { Store s(path); }, {"kernel cache " + path, "mode 0662"});
  chmod(path.c_str(), 0600);
  {
    test::ScopedEnv yes("ONECAT_ALLOW_SHARED_CACHE", "1");
    chmod(dir.c_str(), 0777);
    Store s(path);  // allowed, with a warning
    EXPECT_TRUE(s.find_binary("key0").has_value());
    chmod(dir.c_str(), 0700);
  }
  Store fine(path);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
    expect_throw<Error>([&] { Store s(path); }, {"belongs to another user (uid 65534)"});
  }
}

// The key process p writes at step i: odd steps are shared by every process, even steps
// belong to p alone, so the processes collide on shared keys throughout the run.
std::string worker_key(int p, int i) {
  return i % 2 ? "shared" + std::to_string(i / 2) : "p" + std::to_string(p) + "-" + std::to_string(i);
}

TEST(Store, ManyProcessesWriteAtOnce) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  constexpr int kProcesses = 6;
  constexpr int kPerProcess = 30;

  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 0) code = 3;  // blocks until the parent closes the pipe
        Store s(path);
        int written = 0;
        for (int i = 0; i < kPerProcess; ++i) {
          if (s.put_binary(make_binary(worker_key(p, i), p % 2 ? "sm_90" : "sm_70"))) ++written;
        }
        std::ofstream(path + ".count" + std::to_string(p)) << written;
      } catch (const std::exception& e) {
        std::ofstream(path + ".error" + std::to_string(p)) << e.what();
        code = 1;
      } catch (...) {
        code = 2;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(go[1]);  // every worker starts at once
  for (size_t p = 0; p < pids.size(); ++p) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[p], &status, 0), pids[p]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << p << " failed: " << test::read_file(path + ".error" + std::to_string(p));
  }

  std::set<std::string> expected;
  for (int p = 0; p < kProcesses; ++p) {
    for (int i = 0; i < kPerProcess; ++i) expected.insert(worker_key(p, i));
  }
  ASSERT_EQ(expected.size(), size_t(kPerProcess / 2 + kProcesses * kPerProcess / 2));
  int written_total = 0;
  for (int p = 0; p < kProcesses; ++p) written_total += std::stoi("0" + test::read_file(path + ".count" + std::to_string(p)));
  EXPECT_EQ(written_total, int(expected.size())) << "each key is written by exactly one process";

  Store s(path);
  auto rows = s.list_binaries();
  std::multiset<std::string> keys;
  for (const auto& b : rows) keys.insert(b.key);
  EXPECT_EQ(keys.size(), expected.size());
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), expected);
  for (const auto& k : expected) EXPECT_EQ(keys.count(k), 1u) << k;
  for (const auto& k : {std::string("shared0"), std::string("p3-2")}) {
    auto b = s.find_binary(k);
    ASSERT_TRUE(b.has_value()) << k;
    EXPECT_EQ(b->cubin, fake_cubin(k));
  }
  Store::Verification v = s.verify();
  EXPECT_EQ(v.checked, int64_t(expected.size()));
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
}

}  // namespace
}  // namespace onecat
