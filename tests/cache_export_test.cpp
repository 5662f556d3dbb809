// Tuning records (schema 2), the v1 → v2 migration, and moving a cache between machines:
// export, import (with and without recompiling to verify), every refusal leaving the
// target store unchanged, filters, concurrent importers and the CLI.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/sha256.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/jit/compiler.h"
#include "runtime/jit/import.h"
#include "runtime/jit/service.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::contains;
using test::expect_throw;
using test::TempDir;

// The discovery this process makes must not follow a caller's ONECAT_NVRTC.
[[maybe_unused]] const bool kNvrtcEnvCleared = (unsetenv("ONECAT_NVRTC"), true);

const std::string kSpec4096 = "rmsnorm:hidden=4096,dtype=f16,residual=1";
const std::string kSpec1024 = "rmsnorm:hidden=1024,dtype=f16,residual=0";

int rmsnorm_generator() { return family_of(kSpec4096).generator_version(); }

DeviceFingerprint v100() { return {"Tesla V100-SXM2-32GB", 70, 80, "12.8", "12.8"}; }
DeviceFingerprint h200() { return {"NVIDIA H200", 90, 132, "13.0", "13.0"}; }
DeviceFingerprint gpu(int i) { return {"GPU " + std::to_string(i), 70, 80, "12.8", "12.8"}; }

TuningRecord make_tuning(const DeviceFingerprint& device, const std::string& spec, int64_t bucket, double best_us = 10.5) {
  TuningRecord t;
  t.device = device;
  t.family = "rmsnorm";
  t.generator_version = rmsnorm_generator();
  t.spec = spec;
  t.bucket = bucket;
  // Configs valid for the spec: import refuses records that name a config that cannot run.
  const bool narrow = spec == kSpec1024;
  t.config = narrow ? "row_threads=64,vec=8,rows=1" : "row_threads=128,vec=8,rows=1";
  t.default_config = narrow ? "row_threads=128,vec=8,rows=1" : "row_threads=256,vec=8,rows=1";
  t.best_us = best_us;
  t.default_us = 14.25;
  t.candidates = {{t.config, "ok", best_us, best_us - 0.5, best_us + 1, ""},
                  {t.default_config, "ok", 14.25, 14.0, 15.0, ""},
                  {"row_threads=1024,vec=8,rows=1", "spills", std::nan(""), std::nan(""), std::nan(""), "8 bytes spilled"}};
  t.key = tuning_key(t);
  return t;
}

// A real rmsnorm kernel, a hidden size of its own per name, compiled once per process: import
// refuses rows whose key, cubin and kernel name do not agree, so made-up rows will not do.
const KernelBinary& named_binary(const std::string& name, const std::string& arch = "sm_70") {
  static std::map<std::string, int> hidden_of;
  static std::map<std::string, KernelBinary> made;
  const int hidden = hidden_of.try_emplace(name, 64 * (int(hidden_of.size()) + 1)).first->second;
  auto it = made.find(name + "@" + arch);
  if (it == made.end()) {
    const std::string spec = "rmsnorm:hidden=" + std::to_string(hidden) + ",dtype=f16,residual=1";
    const Family& f = family_of(spec);
    const Arch a = Arch::parse(arch);
    JitService jit(nullptr);
    it = made.emplace(name + "@" + arch, jit.get(CompileRequest::make(f, spec, f.default_config(spec, 1, a), a)).binary).first;
  }
  return it->second;
}

// Two real rmsnorm kernels for sm_70, compiled once per process through the compile service.
const std::vector<KernelBinary>& real_binaries() {
  static const std::vector<KernelBinary> binaries = [] {
    JitService jit(nullptr);
    std::vector<KernelBinary> out;
    for (const std::string& spec : {kSpec4096, kSpec1024}) {
      const Family& f = family_of(spec);
      out.push_back(jit.get(CompileRequest::make(f, spec, f.default_config(spec, 1, Arch{70}), Arch{70})).binary);
    }
    return out;
  }();
  return binaries;
}

using test::raw_sql;

std::string raw_value(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::string out;
  if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// Replaces one binary's cubin (and, when asked, its checksum to match) with plain SQLite.
void set_cubin(const std::string& path, const std::string& key, const std::string& cubin, bool fix_checksum) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql = fix_checksum ? "UPDATE binaries SET cubin=?1, cubin_sha256=?3 WHERE key=?2"
                                 : "UPDATE binaries SET cubin=?1 WHERE key=?2";
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
  sqlite3_bind_blob(st, 1, cubin.data(), int(cubin.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, key.c_str(), -1, SQLITE_TRANSIENT);
  const std::string sum = to_hex(sha256(cubin));
  if (fix_checksum) sqlite3_bind_text(st, 3, sum.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
}

void expect_same_tuning(const TuningRecord& got, const TuningRecord& want) {
  EXPECT_EQ(got.key, want.key);
  EXPECT_EQ(got.device.name, want.device.name);
  EXPECT_EQ(got.device.sm, want.device.sm);
  EXPECT_EQ(got.device.multiprocessors, want.device.multiprocessors);
  EXPECT_EQ(got.device.driver, want.device.driver);
  EXPECT_EQ(got.device.nvrtc_version, want.device.nvrtc_version);
  EXPECT_EQ(got.family, want.family);
  EXPECT_EQ(got.generator_version, want.generator_version);
  EXPECT_EQ(got.spec, want.spec);
  EXPECT_EQ(got.bucket, want.bucket);
  EXPECT_EQ(got.config, want.config);
  EXPECT_EQ(got.default_config, want.default_config);
  EXPECT_DOUBLE_EQ(got.best_us, want.best_us);
  EXPECT_DOUBLE_EQ(got.default_us, want.default_us);
  ASSERT_EQ(got.candidates.size(), want.candidates.size());
  for (size_t i = 0; i < got.candidates.size(); ++i) {
    const auto &g = got.candidates[i], &w = want.candidates[i];
    EXPECT_EQ(g.config, w.config);
    EXPECT_EQ(g.status, w.status);
    for (auto [a, b] : {std::pair{g.median_us, w.median_us}, std::pair{g.min_us, w.min_us}, std::pair{g.max_us, w.max_us}}) {
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a));
      } else {
        EXPECT_DOUBLE_EQ(a, b);
      }
    }
    EXPECT_EQ(g.detail, w.detail);
  }
}

// Everything a store holds, as text: equal snapshots mean an unchanged store.
std::string snapshot(const std::string& path) {
  Store s(path);
  std::string out;
  for (const auto& b : s.list_binaries()) {
    out += "B " + b.key + " " + to_hex(sha256(s.find_binary(b.key)->cubin)) + "\n";
  }
  for (const auto& t : s.list_tunings()) {
    out += "T " + t.key + " " + t.config + " " + std::to_string(t.best_us) + " " + std::to_string(t.candidates.size()) + "\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Tuning records

TEST(Tuning, PutFindReplaceListStatsClear) {
  TempDir tmp;
  Store s(tmp / "kernels.sqlite");
  EXPECT_EQ(s.schema_version(), 2);
  const TuningRecord a = make_tuning(v100(), kSpec4096, 8);
  EXPECT_FALSE(s.find_tuning(a.key).has_value());
  EXPECT_TRUE(s.put_tuning(a));
  auto got = s.find_tuning(a.key);
  ASSERT_TRUE(got.has_value());
  expect_same_tuning(*got, a);

  // A newer measurement of the same key replaces the old one.
  TuningRecord newer = a;
  newer.config = "row_threads=64,vec=8,rows=2";
  newer.best_us = 9.0;
  newer.candidates.pop_back();
  EXPECT_FALSE(s.put_tuning(newer));
  got = s.find_tuning(a.key);
  ASSERT_TRUE(got.has_value());
  expect_same_tuning(*got, newer);

  // An empty key is filled in from the fields.
  TuningRecord unkeyed = make_tuning(h200(), kSpec1024, 1);
  const std::string key = unkeyed.key;
  unkeyed.key.clear();
  EXPECT_TRUE(s.put_tuning(unkeyed));
  ASSERT_TRUE(s.find_tuning(key).has_value());
  EXPECT_TRUE(s.put_tuning(make_tuning(v100(), kSpec4096, 1)));

  auto all = s.list_tunings();
  ASSERT_EQ(all.size(), 3u);  // ordered by family, spec, bucket, device
  EXPECT_EQ(all[0].spec, kSpec1024);
  EXPECT_EQ(all[1].spec, kSpec4096);
  EXPECT_EQ(all[1].bucket, 1);
  EXPECT_EQ(all[2].bucket, 8);
  expect_same_tuning(all[2], newer);

  EXPECT_EQ(s.stats().tunings, 3);
  EXPECT_EQ(s.stats().binaries, 0);
  EXPECT_TRUE(s.put_binary(named_binary("b1")));
  Store::Verification v = s.verify();
  EXPECT_EQ(v.checked, 1);
  EXPECT_EQ(v.tunings_checked, 3);
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();

  int64_t tunings_removed = 0;
  EXPECT_EQ(s.clear(&tunings_removed), 1);
  EXPECT_EQ(tunings_removed, 3);
  EXPECT_TRUE(s.list_tunings().empty());
  EXPECT_EQ(s.stats().tunings, 0);
}

TEST(Tuning, VerifyFindsBadCandidatesJsonAndWrongKeys) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  const TuningRecord a = make_tuning(v100(), kSpec4096, 8), b = make_tuning(v100(), kSpec4096, 16);
  {
    Store s(path);
    s.put_tuning(a);
    s.put_tuning(b);
  }
  raw_sql(path, "UPDATE tunings SET candidates='[{\"config\": ' WHERE key='" + a.key + "'");
  raw_sql(path, "UPDATE tunings SET bucket=32 WHERE key='" + b.key + "'");
  Store s(path);
  Store::Verification v = s.verify();
  EXPECT_EQ(v.tunings_checked, 2);
  ASSERT_EQ(v.problems.size(), 2u);
  const std::string all = v.problems[0] + "\n" + v.problems[1];
  EXPECT_TRUE(contains(all, a.key + ": candidates are not valid JSON")) << all;
  EXPECT_TRUE(contains(all, b.key + ": key does not match its fields")) << all;
  expect_throw<Error>([&] { s.find_tuning(a.key); }, {"not valid JSON", "onecat cache verify"});
}

TEST(Tuning, KeyChangesWithEveryField) {
  const DeviceFingerprint d = v100();
  const std::string base = tuning_key(d, "rmsnorm", 1, kSpec4096, 8);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(tuning_key(d, "rmsnorm", 1, kSpec4096, 8), base);
  std::set<std::string> keys = {base};
  auto differs = [&](const std::string& k, const char* what) {
    EXPECT_NE(k, base) << what;
    EXPECT_TRUE(keys.insert(k).second) << what << " collides with another variation";
  };
  auto with = [&](auto edit) {
    DeviceFingerprint e = d;
    edit(e);
    return tuning_key(e, "rmsnorm", 1, kSpec4096, 8);
  };
  differs(with([](DeviceFingerprint& e) { e.name = "Tesla V100-PCIE-16GB"; }), "device name");
  differs(with([](DeviceFingerprint& e) { e.sm = 72; }), "sm");
  differs(with([](DeviceFingerprint& e) { e.multiprocessors = 72; }), "SM count");
  differs(with([](DeviceFingerprint& e) { e.driver = "12.9"; }), "driver");
  differs(with([](DeviceFingerprint& e) { e.nvrtc_version = "12.9"; }), "NVRTC version");
  differs(tuning_key(d, "gemm", 1, kSpec4096, 8), "family");
  differs(tuning_key(d, "rmsnorm", 2, kSpec4096, 8), "generator version");
  differs(tuning_key(d, "rmsnorm", 1, kSpec1024, 8), "spec");
  differs(tuning_key(d, "rmsnorm", 1, kSpec4096, 16), "bucket");
  // Fields are length-prefixed: moving text across a boundary is another key.
  DeviceFingerprint shifted = d;
  shifted.driver = "12.81";
  shifted.nvrtc_version = "2.8";
  differs(tuning_key(shifted, "rmsnorm", 1, kSpec4096, 8), "shifted boundary");
  // The record overload hashes the record's fields.
  TuningRecord t = make_tuning(d, kSpec4096, 8);
  EXPECT_EQ(tuning_key(t), tuning_key(d, "rmsnorm", rmsnorm_generator(), kSpec4096, 8));
}

// ---------------------------------------------------------------------------------------
// Migration

TEST(Migration, SchemaOneStoreMigratesInPlace) {
  TempDir tmp;
  const std::string path = tmp / "kernels.sqlite";
  const std::string cubin_hex = "7F454C460102030405";
  const std::string cubin = std::string("\x7f" "ELF\x01\x02\x03\x04\x05", 9);
  // A schema-1 store exactly as onecat 1 wrote it.
  raw_sql(path, R"SQL(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES('format', 'onecat-kernel-cache');
INSERT INTO meta VALUES('schema_version', '1');
CREATE TABLE binaries(
  key TEXT PRIMARY KEY, family TEXT NOT NULL, spec TEXT NOT NULL, config TEXT NOT NULL, arch TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL, options TEXT NOT NULL, cubin BLOB NOT NULL, cubin_sha256 TEXT NOT NULL,
  lowered_name TEXT NOT NULL, registers INTEGER NOT NULL, shared_bytes INTEGER NOT NULL,
  spill_store_bytes INTEGER NOT NULL, spill_load_bytes INTEGER NOT NULL, stack_bytes INTEGER NOT NULL,
  barriers INTEGER NOT NULL, compile_ms REAL NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));
CREATE INDEX binaries_by_spec ON binaries(family, spec, arch);
INSERT INTO binaries(key, family, spec, config, arch, nvrtc_version, options, cubin, cubin_sha256, lowered_name,
  registers, shared_bytes, spill_store_bytes, spill_load_bytes, stack_bytes, barriers, compile_ms)
  VALUES('old1', 'rmsnorm', 'rmsnorm:hidden=4096,dtype=f16,residual=1', 'row_threads=256,vec=8,rows=1', 'sm_70',
  '12.8', '-x', X')SQL" + cubin_hex + "', '" + to_hex(sha256(cubin)) + R"SQL(', '_Z1kv', 30, 0, 0, 0, 0, 1, 5.0);
)SQL");
  ASSERT_EQ(raw_value(path, "SELECT count(*) FROM sqlite_master WHERE name='tunings'"), "0");
  {
    Store s(path);
    EXPECT_EQ(s.schema_version(), 2);
    auto old = s.find_binary("old1");
    ASSERT_TRUE(old.has_value());
    EXPECT_EQ(old->cubin, cubin);
    EXPECT_EQ(old->usage.registers, 30);
    EXPECT_TRUE(s.list_tunings().empty());
    EXPECT_TRUE(s.put_tuning(make_tuning(v100(), kSpec4096, 4)));
    Store::Verification v = s.verify();
    EXPECT_TRUE(v.problems.empty()) << v.problems.front();
    EXPECT_EQ(v.checked, 1);
    EXPECT_EQ(v.tunings_checked, 1);
  }
  EXPECT_EQ(raw_value(path, "SELECT value FROM meta WHERE key='schema_version'"), "2");
  EXPECT_EQ(raw_value(path, "SELECT count(*) FROM tunings"), "1");
  Store again(path);  // a second open finds nothing to do
  EXPECT_EQ(again.list_binaries().size(), 1u);
  EXPECT_EQ(again.list_tunings().size(), 1u);
}

// ---------------------------------------------------------------------------------------
// Export and import

// A source store with the two real binaries and three tuning records (two devices).
void fill_source(const std::string& path) {
  Store s(path);
  for (const auto& b : real_binaries()) ASSERT_TRUE(s.put_binary(b));
  ASSERT_TRUE(s.put_tuning(make_tuning(v100(), kSpec4096, 1)));
  ASSERT_TRUE(s.put_tuning(make_tuning(v100(), kSpec4096, 8)));
  ASSERT_TRUE(s.put_tuning(make_tuning(h200(), kSpec1024, 1)));
}

TEST(Export, WritesOneSelfContainedFileAndRoundTrips) {
  ASSERT_EQ(real_binaries().size(), 2u);
  TempDir tmp;
  const std::string src = tmp / "src/kernels.sqlite", file = tmp / "out/export.onecat";
  fill_source(src);
  std::filesystem::create_directories(tmp / "out");
  Store from(src);
  ExportReport er = export_cache(from, file, {});
  EXPECT_EQ(er.file, file);
  EXPECT_EQ(er.binaries, 2);
  EXPECT_EQ(er.tunings, 3);
  // Exactly one file, no WAL, no temporary left behind.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "out")) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"export.onecat"});
  EXPECT_EQ(raw_value(file, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(raw_value(file, "SELECT value FROM meta WHERE key='format'"), kStoreFormat);
  EXPECT_EQ(raw_value(file, "SELECT value FROM meta WHERE key='schema_version'"), std::to_string(kSchemaVersion));
  EXPECT_TRUE(contains(raw_value(file, "SELECT value FROM meta WHERE key='exported_by'"), "onecat"));
  EXPECT_EQ(raw_value(file, "SELECT value FROM meta WHERE key='exported_at'").size(), 20u);  // 2026-11-29T12:00:00Z

  // Into an empty store.
  const std::string dst = tmp / "dst/kernels.sqlite";
  Store into(dst);
  ImportReport r = import_cache(into, file, false);
  EXPECT_TRUE(r.imported);
  EXPECT_FALSE(r.verified);
  EXPECT_EQ(r.binaries_added, 2);
  EXPECT_EQ(r.binaries_present, 0);
  EXPECT_EQ(r.tunings_added, 3);
  EXPECT_EQ(r.tunings_present, 0);
  for (const auto& b : real_binaries()) {
    auto got = into.find_binary(b.key);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->cubin, b.cubin);
    EXPECT_EQ(got->lowered_name, b.lowered_name);
    EXPECT_EQ(got->usage.registers, b.usage.registers);
  }
  for (const auto& t : from.list_tunings()) {
    auto got = into.find_tuning(t.key);
    ASSERT_TRUE(got.has_value());
    expect_same_tuning(*got, t);
  }
  EXPECT_TRUE(into.verify().problems.empty());
  EXPECT_EQ(snapshot(dst), snapshot(src));

  // Again: everything is already there, and a local tuning is kept over the imported one.
  TuningRecord local = make_tuning(v100(), kSpec4096, 8, 7.0);
  local.config = "row_threads=64,vec=8,rows=2";
  into.put_tuning(local);
  ImportReport again = import_cache(into, file, false);
  EXPECT_EQ(again.binaries_added, 0);
  EXPECT_EQ(again.binaries_present, 2);
  EXPECT_EQ(again.tunings_added, 0);
  EXPECT_EQ(again.tunings_present, 3);
  EXPECT_EQ(into.find_tuning(local.key)->config, local.config);

  // Exporting over an existing file replaces it.
  ExportReport er2 = export_cache(from, file, ExportFilter{"sm_90", ""});
  EXPECT_EQ(er2.binaries, 0);
  EXPECT_EQ(raw_value(file, "SELECT count(*) FROM binaries"), "0");
}

TEST(Export, VerifiedImportRecompilesEveryBinary) {
  TempDir tmp;
  const std::string src = tmp / "src.sqlite", file = tmp / "export.onecat", dst = tmp / "dst.sqlite";
  fill_source(src);
  export_cache(Store(src), file, {});
  Store into(dst);
  ImportReport r = import_cache(into, file, true);
  EXPECT_TRUE(r.imported);
  EXPECT_TRUE(r.verified);
  ASSERT_EQ(r.verification.size(), 2u);
  for (const auto& v : r.verification) EXPECT_TRUE(v.ok) << v.key << ": " << v.detail;
  EXPECT_EQ(r.verification_failures(), 0);
  EXPECT_EQ(r.binaries_added, 2);
  EXPECT_EQ(r.tunings_added, 3);
}

TEST(Export, FiltersByArchAndDevice) {
  TempDir tmp;
  const std::string src = tmp / "src.sqlite", file = tmp / "export.onecat";
  {
    Store s(src);
    s.put_binary(named_binary("a70"));
    s.put_binary(named_binary("b70"));
    s.put_binary(named_binary("c90", "sm_90"));
    s.put_tuning(make_tuning(v100(), kSpec4096, 1));
    s.put_tuning(make_tuning({"Tesla V100-PCIE-16GB", 70, 80, "12.8", "12.8"}, kSpec4096, 1));
    s.put_tuning(make_tuning(h200(), kSpec4096, 1));
  }
  Store from(src);
  auto keys = [&](const char* table) {
    std::set<std::string> out;
    Store s(tmp / "check.sqlite");
    s.clear();
    import_cache(s, file, false);
    if (std::string(table) == "binaries") {
      for (const auto& b : s.list_binaries()) out.insert(b.key);
    } else {
      for (const auto& t : s.list_tunings()) out.insert(t.device.name);
    }
    return out;
  };
  ExportReport r = export_cache(from, file, ExportFilter{"sm_70", ""});
  EXPECT_EQ(r.binaries, 2);
  EXPECT_EQ(r.tunings, 2);
  EXPECT_EQ(keys("binaries"), (std::set<std::string>{named_binary("a70").key, named_binary("b70").key}));
  EXPECT_EQ(keys("tunings"), (std::set<std::string>{"Tesla V100-SXM2-32GB", "Tesla V100-PCIE-16GB"}));

  r = export_cache(from, file, ExportFilter{"9.0", ""});  // any spelling Arch::parse reads
  EXPECT_EQ(r.binaries, 1);
  EXPECT_EQ(r.tunings, 1);
  EXPECT_EQ(keys("tunings"), (std::set<std::string>{"NVIDIA H200"}));

  r = export_cache(from, file, ExportFilter{"", "pcie"});  // device filter: tunings only, any case
  EXPECT_EQ(r.binaries, 3);
  EXPECT_EQ(r.tunings, 1);
  EXPECT_EQ(keys("tunings"), (std::set<std::string>{"Tesla V100-PCIE-16GB"}));

  r = export_cache(from, file, ExportFilter{"sm_70", "H200"});
  EXPECT_EQ(r.binaries, 2);
  EXPECT_EQ(r.tunings, 0);

  expect_throw<InputError>([&] { export_cache(from, tmp / "bad.onecat", ExportFilter{"volta", ""}); }, {"volta"});
  EXPECT_FALSE(std::filesystem::exists(tmp / "bad.onecat"));
}

TEST(Export, AFailedExportLeavesNoFile) {
  TempDir tmp;
  const std::string src = tmp / "src.sqlite";
  fill_source(src);
  Store from(src);
  // The target is a directory: refused before anything is written, and no temporary stays.
  std::filesystem::create_directories(tmp / "taken/sub");
  expect_throw<InputError>([&] { export_cache(from, tmp / "taken", {}); }, {"not a regular file"});
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp-")) << e.path();
  }
  EXPECT_TRUE(std::filesystem::is_directory(tmp / "taken/sub"));
}

// Renaming over a device node or FIFO replaces it, and writing over the live store corrupts
// it: both are refused and left as they were.
TEST(Export, RefusesAnythingButAPlainFileAndTheLiveStore) {
  TempDir tmp;
  const std::string src = tmp / "cache/kernels.sqlite";
  fill_source(src);
  const std::string before = snapshot(src);
  Store from(src);
  const std::string fifo = tmp / "pipe", link = tmp / "link", target = tmp / "plain.onecat";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  test::write_file(target, "old");
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  for (const std::string& bad : {std::string("/dev/null"), fifo, link}) {
    SCOPED_TRACE(bad);
    expect_throw<InputError>([&] { export_cache(from, bad, {}); }, {"not a regular file", bad});
  }
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the null device must stay a device";
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(test::read_file(target), "old");

  expect_throw<InputError>([&] { export_cache(from, src, ExportFilter{"sm_80", ""}); }, {"kernel cache being exported"});
  // The same file under another name is the same store.
  const std::string hard = tmp / "alias.sqlite";
  ASSERT_EQ(::link(src.c_str(), hard.c_str()), 0);
  expect_throw<InputError>([&] { export_cache(from, hard, {}); }, {"kernel cache being exported"});
  unlink(hard.c_str());
  EXPECT_EQ(snapshot(src), before);
  EXPECT_TRUE(from.verify().problems.empty());

  // A plain file is replaced as before.
  EXPECT_EQ(export_cache(from, target, {}).binaries, 2);
  EXPECT_EQ(raw_value(target, "SELECT count(*) FROM binaries"), "2");
}

// A killed export cannot clean up; the next export to the same file removes what a process
// that is gone left, and keeps what a live one is writing.
TEST(Export, RemovesWhatAKilledExportLeftBehind) {
  TempDir tmp;
  const std::string src = tmp / "src.sqlite", file = tmp / "x.onecat";
  fill_source(src);
  const pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const std::string dead = file + ".tmp-" + std::to_string(gone), alive = file + ".tmp-1";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) test::write_file(dead + suffix, "left");
  test::write_file(alive, "in use");
  test::write_file(file + ".tmp-notapid", "someone else's");
  export_cache(Store(src), file, {});
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    EXPECT_FALSE(std::filesystem::exists(dead + suffix)) << dead + suffix;
  }
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(file + ".tmp-notapid"));
  EXPECT_EQ(raw_value(file, "SELECT count(*) FROM binaries"), "2");
}

// A target store with one entry of each kind, and the ways to spoil an export file.
class ImportRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    fill_source(src_);
    {
      Store s(src_);
      for (int i = 0; i < 8; ++i) s.put_binary(named_binary("bulk" + std::to_string(i), "sm_90"));
      export_cache(s, good_, {});
      export_cache(s, real_only_, ExportFilter{"sm_70", ""});
    }
    Store t(target_);
    t.put_binary(named_binary("mine"));
    t.put_tuning(make_tuning(v100(), kSpec1024, 64));
    before_ = snapshot(target_);
  }
  // A copy of the good export to spoil.
  std::string copy(const std::string& name, const std::string& from = "") {
    const std::string path = tmp_ / name;
    std::filesystem::copy_file(from.empty() ? good_ : from, path);
    return path;
  }
  std::string refuse(const std::string& file, std::initializer_list<std::string_view> needles, bool verify = false) {
    Store t(target_);
    std::string msg = expect_throw<InputError>([&] { import_cache(t, file, verify); }, needles);
    EXPECT_TRUE(contains(msg, file)) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one sentence: " << msg;
    EXPECT_EQ(snapshot(target_), before_) << "the target changed";
    return msg;
  }

  TempDir tmp_;
  const std::string src_ = tmp_ / "src.sqlite", good_ = tmp_ / "good.onecat", real_only_ = tmp_ / "real.onecat",
                    target_ = tmp_ / "target/kernels.sqlite";
  std::string before_;
};

TEST_F(ImportRefusal, MissingFile) { refuse(tmp_ / "nope.onecat", {"no such file"}); }

TEST_F(ImportRefusal, TruncatedFile) {
  const auto size = std::filesystem::file_size(good_);
  ASSERT_GT(size, 60000u);
  for (uintmax_t to : {uintmax_t(1000), size / 2, size - 4096}) {
    SCOPED_TRACE("truncated to " + std::to_string(to));
    const std::string path = copy("trunc" + std::to_string(to));
    std::filesystem::resize_file(path, to);
    refuse(path, {"damaged", "nothing was imported"});
  }
}

// A cut chain of a cubin's overflow pages: SQLite's integrity report is many lines ("*** in
// database main ***", then a line per problem), and the refusal printed them all.
TEST_F(ImportRefusal, BrokenPageChainIsOneLine) {
  const std::string path = copy("chain.onecat");
  std::string bytes = test::read_file(path);
  auto big_endian = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = v << 8 | uint8_t(bytes[at + size_t(i)]);
    return v;
  };
  const size_t page = big_endian(16, 2) == 1 ? 65536 : size_t(big_endian(16, 2));
  const uint64_t pages = big_endian(28, 4);
  // An overflow page starts with its successor's number; a b-tree page with its type (2, 5, 10, 13).
  bool cut = false;
  for (uint64_t p = 2; p <= pages && !cut; ++p) {
    const size_t at = size_t(p - 1) * page;
    const uint64_t next = big_endian(at, 4);
    if (bytes[at] == 0 && next >= 2 && next <= pages) {
      bytes.replace(at, 4, std::string(4, '\0'));
      cut = true;
    }
  }
  ASSERT_TRUE(cut) << "no overflow page with a successor in " << pages << " pages";
  test::write_file(path, bytes);
  refuse(path, {"SQLite's integrity check says: ", "damaged"});
}

TEST_F(ImportRefusal, RandomBytes) {
  std::mt19937 rng(7);
  std::string junk(8192, '\0');
  for (auto& c : junk) c = char(rng());
  const std::string path = tmp_ / "junk.onecat";
  test::write_file(path, junk);
  refuse(path, {"damaged or not an SQLite file"});
  test::write_file(path, "");
  refuse(path, {"not an onecat kernel cache"});  // SQLite reads an empty file as an empty database
}

TEST_F(ImportRefusal, ForeignSqliteDatabase) {
  const std::string path = tmp_ / "foreign.sqlite";
  raw_sql(path, "CREATE TABLE foo(x); INSERT INTO foo VALUES(1);");
  refuse(path, {"not an onecat kernel cache"});
  const std::string other = tmp_ / "other.sqlite";
  raw_sql(other, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES('format','x');");
  refuse(other, {"not an onecat kernel cache"});
}

TEST_F(ImportRefusal, NewerSchema) {
  const std::string path = copy("newer.onecat");
  raw_sql(path, "UPDATE meta SET value='" + std::to_string(kSchemaVersion + 1) + "' WHERE key='schema_version'");
  refuse(path, {"newer onecat", "schema " + std::to_string(kSchemaVersion + 1), "update onecat"});
}

TEST_F(ImportRefusal, GeneratorVersionMismatch) {
  const std::string path = copy("generator.onecat");
  const int g = rmsnorm_generator();
  raw_sql(path, "UPDATE tunings SET generator_version=" + std::to_string(g + 1) + " WHERE bucket=8");
  refuse(path, {"family 'rmsnorm'", "generator version " + std::to_string(g + 1), "generator version " + std::to_string(g)});
  const std::string unknown = copy("unknown.onecat");
  raw_sql(unknown, "UPDATE tunings SET family='softmax' WHERE bucket=8");
  refuse(unknown, {"'softmax'", "does not have"});
}

TEST_F(ImportRefusal, FlippedCubinByte) {
  const std::string path = copy("flipped.onecat");
  const std::string key = real_binaries()[0].key;
  std::string cubin = real_binaries()[0].cubin;
  cubin[cubin.size() / 2] = char(cubin[cubin.size() / 2] ^ 0x10);
  set_cubin(path, key, cubin, /*fix_checksum=*/false);
  refuse(path, {"does not match its checksum", key.substr(0, 16)});
}

TEST_F(ImportRefusal, BadTuningRecords) {
  const std::string json = copy("json.onecat");
  raw_sql(json, "UPDATE tunings SET candidates='not json' WHERE bucket=8");
  refuse(json, {"candidates are not valid JSON"});
  const std::string key = copy("key.onecat");
  raw_sql(key, "UPDATE tunings SET bucket=16 WHERE bucket=8");
  refuse(key, {"does not match its key"});
}

// A cubin changed together with its checksum passes every check but a recompile.
TEST_F(ImportRefusal, OnlyVerifyCatchesAConsistentlyTamperedCubin) {
  const std::string path = copy("tampered.onecat", real_only_);
  const KernelBinary& b = real_binaries()[1];
  std::string cubin = b.cubin;
  cubin[cubin.size() / 2] = char(cubin[cubin.size() / 2] ^ 0x01);
  set_cubin(path, b.key, cubin, /*fix_checksum=*/true);

  Store t(target_);
  ImportReport r = import_cache(t, path, true);
  EXPECT_FALSE(r.imported);
  EXPECT_TRUE(r.verified);
  ASSERT_EQ(r.verification.size(), 2u);
  EXPECT_EQ(r.verification_failures(), 1);
  for (const auto& v : r.verification) {
    if (v.key == b.key) {
      EXPECT_FALSE(v.ok);
      EXPECT_TRUE(contains(v.detail, "recompiled cubin differs")) << v.detail;
      EXPECT_TRUE(contains(v.detail, "first difference at byte " + std::to_string(cubin.size() / 2))) << v.detail;
    } else {
      EXPECT_TRUE(v.ok) << v.detail;
    }
  }
  EXPECT_EQ(r.binaries_added, 0);
  EXPECT_EQ(snapshot(target_), before_) << "nothing imported";

  // Without --verify the same file is accepted (into another store).
  Store other(tmp_ / "other.sqlite");
  EXPECT_TRUE(import_cache(other, path, false).imported);
  EXPECT_EQ(other.find_binary(b.key)->cubin, cubin);
}

TEST_F(ImportRefusal, VerifyNeedsTheSameNvrtc) {
  // A row made by another NVRTC, consistent in itself: import --verify cannot rebuild it here.
  const KernelBinary& b = real_binaries()[0];
  const std::string path = copy("nvrtc.onecat", real_only_);
  const std::vector<std::string> options = nvrtc_options(Arch{70});
  const std::string key = binary_key(CompileRequest::make(family_of(b.spec), b.spec, b.config, Arch{70}), "11.4", options);
  raw_sql(path, "UPDATE binaries SET nvrtc_version='11.4', key='" + key + "' WHERE key='" + b.key + "'");
  Store t(target_);
  ImportReport r = import_cache(t, path, true);
  EXPECT_FALSE(r.imported);
  ASSERT_EQ(r.verification_failures(), 1);
  for (const auto& v : r.verification) {
    if (!v.ok) {
      EXPECT_EQ(v.detail, "cannot verify: built with NVRTC 11.4, this machine has 12.8");
    }
  }
  EXPECT_EQ(snapshot(target_), before_);
}

// Every field a row's key hashes is checked against the key on import, and the cubin must be
// the kernel the row names: rows swapped, relabelled or re-keyed are refused without --verify.
TEST_F(ImportRefusal, RowsThatAreNotWhatTheyClaim) {
  const KernelBinary &a = real_binaries()[0], &b = real_binaries()[1];
  auto swap = [&](const std::string& name, const std::string& columns) {
    const std::string path = copy(name, real_only_);
    raw_sql(path, "CREATE TABLE tmp AS SELECT * FROM binaries; UPDATE binaries SET (" + columns + ") = (SELECT " +
                      columns + " FROM tmp WHERE tmp.key = CASE binaries.key WHEN '" + a.key + "' THEN '" + b.key +
                      "' ELSE '" + a.key + "' END); DROP TABLE tmp;");
    return path;
  };
  refuse(swap("cubins.onecat", "cubin, cubin_sha256"), {"does not define its kernel"});
  refuse(swap("names.onecat", "cubin, cubin_sha256, lowered_name"), {"is not the one its spec and config emit"});
  refuse(swap("specs.onecat", "spec, config"), {"key does not match its spec, config and compiler"});

  const std::string config = copy("config.onecat", real_only_);
  raw_sql(config, "UPDATE binaries SET config='row_threads=128,vec=8,rows=1' WHERE key='" + a.key + "'");
  refuse(config, {"key does not match"});
  const std::string arch = copy("arch.onecat", real_only_);
  raw_sql(arch, "UPDATE binaries SET arch='sm_75' WHERE key='" + a.key + "'");
  refuse(arch, {"not built for sm_75"});
  const std::string truncated = copy("elf.onecat", real_only_);
  set_cubin(truncated, a.key, a.cubin.substr(0, 200), /*fix_checksum=*/true);
  refuse(truncated, {a.key.substr(0, 16)});
}

// Tuning records with their keys recomputed (so only validation can catch them).
TEST_F(ImportRefusal, TuningRecordsOutsideWhatOnecatCanDispatch) {
  const TuningRecord good = make_tuning(v100(), kSpec4096, 8);
  auto spoil = [&](const std::string& name, const std::string& set, const std::string& spec, int64_t bucket) {
    const std::string path = copy(name);
    const std::string key = tuning_key(good.device, good.family, good.generator_version, spec, bucket);
    raw_sql(path, "UPDATE tunings SET " + set + ", key='" + key + "' WHERE key='" + good.key + "'");
    return path;
  };
  const int64_t huge = int64_t(1) << 62;
  refuse(spoil("neg.onecat", "bucket=-5", kSpec4096, -5), {"bucket is not a power of two"});
  refuse(spoil("huge.onecat", "bucket=" + std::to_string(huge), kSpec4096, huge), {"bucket is not a power of two"});
  refuse(spoil("three.onecat", "bucket=3", kSpec4096, 3), {"bucket is not a power of two"});
  const std::string zero = "rmsnorm:hidden=0,dtype=f16,residual=1";
  refuse(spoil("zero.onecat", "spec='" + zero + "'", zero, 8), {"hidden"});
  const std::string loose = "rmsnorm:residual=1,hidden=4096,dtype=f16";
  refuse(spoil("order.onecat", "spec='" + loose + "'", loose, 8), {"not in canonical form"});
  refuse(spoil("vec.onecat", "config='row_threads=128,vec=99,rows=1'", kSpec4096, 8), {"vec"});
  refuse(spoil("default.onecat", "default_config='bogus'", kSpec4096, 8), {"bogus"});
}

// Two importers (overlapping files, each imported several times) and a writer at once.
TEST(Import, ProcessesImportAndWriteAtOnce) {
  TempDir tmp;
  const std::string target = tmp / "kernels.sqlite", file_a = tmp / "a.onecat", file_b = tmp / "b.onecat";
  std::set<std::string> binaries, tunings;
  auto make_file = [&](const std::string& file, int from, int to) {
    Store s(tmp / ("src" + std::to_string(from) + ".sqlite"));
    for (int i = from; i < to; ++i) {
      const KernelBinary& b = named_binary("imp" + std::to_string(i));
      s.put_binary(b);
      binaries.insert(b.key);
      TuningRecord t = make_tuning(gpu(i), kSpec4096, 1);
      s.put_tuning(t);
      tunings.insert(t.key);
    }
    export_cache(s, file, {});
  };
  make_file(file_a, 0, 16);
  make_file(file_b, 8, 24);  // 8 entries shared with a
  for (int i = 0; i < 16; ++i) {
    binaries.insert(named_binary("w" + std::to_string(i)).key);  // compiled here, before the fork
    tunings.insert(make_tuning(h200(), i < 13 ? kSpec4096 : kSpec1024, int64_t(1) << (i % 13), 10.5 + i).key);
  }
  { Store create(target); }

  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < 3; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 0) code = 3;
        Store s(target);
        if (p < 2) {
          for (int round = 0; round < 3; ++round) {
            if (!import_cache(s, p == 0 ? file_a : file_b, false).imported) code = 4;
          }
        } else {
          for (int i = 0; i < 16; ++i) {
            s.put_binary(named_binary("w" + std::to_string(i)));
            s.put_tuning(make_tuning(h200(), i < 13 ? kSpec4096 : kSpec1024, int64_t(1) << (i % 13), 10.5 + i));
          }
        }
      } catch (const std::exception& e) {
        std::ofstream(target + ".error" + std::to_string(p)) << e.what();
        code = 1;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(go[1]);
  for (size_t p = 0; p < pids.size(); ++p) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[p], &status, 0), pids[p]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "process " << p << " failed: " << test::read_file(target + ".error" + std::to_string(p));
  }
  Store s(target);
  std::set<std::string> got_b, got_t;
  for (const auto& b : s.list_binaries()) got_b.insert(b.key);
  for (const auto& t : s.list_tunings()) got_t.insert(t.key);
  EXPECT_EQ(got_b, binaries);
  EXPECT_EQ(got_t, tunings);
  EXPECT_EQ(s.stats().binaries, 40);
  EXPECT_EQ(s.stats().tunings, 40);
  Store::Verification v = s.verify();
  EXPECT_EQ(v.checked, 40);
  EXPECT_EQ(v.tunings_checked, 40);
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
}

// ---------------------------------------------------------------------------------------
// CLI

class CacheCli : public ::testing::Test {
 protected:
  test::CommandResult onecat(const std::string& args, const std::string& cache_dir) {
    return test::run_command("ONECAT_CACHE_DIR='" + cache_dir + "' '" + std::string(ONECAT_BIN) + "' " + args, tmp_.path());
  }
  static nlohmann::json parse(const test::CommandResult& r) { return test::parse_json(r); }
  static void expect_one_error_line(const test::CommandResult& r, const std::string& needle) {
    EXPECT_TRUE(r.err.starts_with("onecat: error: ")) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
    EXPECT_TRUE(contains(r.err, needle)) << r.err;
  }
  TempDir tmp_;
  test::ScopedEnv nvrtc_env_{"ONECAT_NVRTC", std::nullopt};
  test::ScopedEnv debug_env_{"ONECAT_DEBUG", std::nullopt};
};

TEST_F(CacheCli, ExportImportAndListTunings) {
  const std::string a = tmp_ / "a", b = tmp_ / "b", file = tmp_ / "x.onecat";
  fill_source(a + "/kernels.sqlite");

  auto ex = onecat("cache export '" + file + "' --arch sm_70 --json", a);
  ASSERT_EQ(ex.status, 0) << ex.err;
  nlohmann::json j = parse(ex);
  EXPECT_EQ(j["binaries"], 2);
  EXPECT_EQ(j["tunings"], 2);  // the V100's two; the H200's is sm_90
  EXPECT_EQ(j["file"], file);
  auto ex_text = onecat("cache export '" + file + "'", a);
  ASSERT_EQ(ex_text.status, 0) << ex_text.err;
  EXPECT_TRUE(contains(ex_text.out, "exported 2 binaries and 3 tuning records")) << ex_text.out;

  auto im = onecat("cache import '" + file + "' --verify --json", b);
  ASSERT_EQ(im.status, 0) << im.err;
  j = parse(im);
  EXPECT_EQ(j["imported"], true);
  EXPECT_EQ(j["binaries_added"], 2);
  EXPECT_EQ(j["tunings_added"], 3);
  EXPECT_EQ(j["verification"].size(), 2u);
  for (const auto& v : j["verification"]) EXPECT_EQ(v["ok"], true) << v.dump();
  auto again = onecat("cache import '" + file + "'", b);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_TRUE(contains(again.out, "0 binaries added, 2 already present; 0 tuning records added, 3 already present"))
      << again.out;

  auto ls = onecat("cache ls --tunings", b);
  ASSERT_EQ(ls.status, 0) << ls.err;
  for (const char* needle : {"spec", "bucket", "device", "best_us", "default_us", "speedup", "Tesla V100-SXM2-32GB",
                             "NVIDIA H200", "row_threads=128,vec=8,rows=1", "10.50", "14.25", "1.36x"}) {
    EXPECT_TRUE(contains(ls.out, needle)) << needle << " missing from:\n" << ls.out;
  }
  auto ls_json = onecat("cache ls --tunings --json", b);
  ASSERT_EQ(ls_json.status, 0) << ls_json.err;
  j = parse(ls_json);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["spec"], kSpec1024);
  EXPECT_EQ(j[0]["device"]["name"], "NVIDIA H200");
  EXPECT_NEAR(j[0]["speedup"].get<double>(), 14.25 / 10.5, 1e-9);
  EXPECT_EQ(j[0]["candidates"].size(), 3u);
  EXPECT_TRUE(j[0]["candidates"][2]["median_us"].is_null());

  auto stats = onecat("cache stats --json", b);
  ASSERT_EQ(stats.status, 0) << stats.err;
  EXPECT_EQ(parse(stats)["tunings"], 3);
  auto clear = onecat("cache clear", b);
  EXPECT_TRUE(contains(clear.out, "removed 2 binaries and 3 tuning records")) << clear.out;
}

TEST_F(CacheCli, BadFilesAndTamperingFailWithOneLine) {
  const std::string a = tmp_ / "a", b = tmp_ / "b";
  test::write_file(tmp_ / "junk.onecat", std::string(5000, 'x'));
  auto junk = onecat("cache import '" + tmp_ / "junk.onecat" + "'", b);
  EXPECT_EQ(junk.status, 2);
  expect_one_error_line(junk, "damaged or not an SQLite file");
  auto missing = onecat("cache import '" + tmp_ / "none.onecat" + "' --json", b);
  EXPECT_EQ(missing.status, 2);
  expect_one_error_line(missing, "no such file");
  auto bad_arch = onecat("cache export '" + tmp_ / "x.onecat" + "' --arch volta", a);
  EXPECT_EQ(bad_arch.status, 2);
  expect_one_error_line(bad_arch, "volta");

  // A consistently tampered cubin: --verify refuses with exit 1 and lists the mismatch.
  fill_source(a + "/kernels.sqlite");
  const std::string file = tmp_ / "t.onecat";
  ASSERT_EQ(onecat("cache export '" + file + "' --arch sm_70", a).status, 0);
  std::string cubin = real_binaries()[0].cubin;
  cubin[100] = char(cubin[100] ^ 0x01);
  set_cubin(file, real_binaries()[0].key, cubin, true);
  auto v = onecat("cache import '" + file + "' --verify", b);
  EXPECT_EQ(v.status, 1);
  expect_one_error_line(v, "verification failed for 1 of 2 binaries");
  EXPECT_TRUE(contains(v.out, "MISMATCH")) << v.out;
  EXPECT_EQ(parse(onecat("cache stats --json", b))["binaries"], 0);
}

TEST_F(CacheCli, HelpForEachCommand) {
  for (const char* cmd : {"cache export --help", "cache import --help", "cache ls --help"}) {
    auto r = onecat(cmd, tmp_ / "c");
    EXPECT_EQ(r.status, 0) << cmd << ": " << r.err;
    EXPECT_TRUE(contains(r.out, "--json")) << r.out;
  }
  EXPECT_TRUE(contains(onecat("cache export --help", tmp_ / "c").out, "--device"));
  EXPECT_TRUE(contains(onecat("cache import --help", tmp_ / "c").out, "--verify"));
  EXPECT_TRUE(contains(onecat("cache ls --help", tmp_ / "c").out, "--tunings"));
}

}  // namespace
}  // namespace onecat
