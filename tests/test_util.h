// Small helpers shared by the CPU test suites: temporary directories, scoped environment
// variables, running a command, and asserting an exception's type and message.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "cache/record.h"

namespace onecat::test {

// The folder of third-party test data scripts/fetch-testdata prints (ONECAT_TESTDATA): real
// tokenizer vocabularies and published chat templates. A failure, not a skip, when unset.
inline std::filesystem::path testdata() {
  const char* dir = std::getenv("ONECAT_TESTDATA");
  if (!dir || !std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "ONECAT_TESTDATA is not set to the test vocabularies; run scripts/fetch-testdata and set "
                     "ONECAT_TESTDATA to the folder it prints (scripts/test does both).";
    return {};
  }
  return dir;
}

// A fresh directory from mkdtemp, removed with its contents when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "onecat_test_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// Sets (or, with nullopt, unsets) an environment variable and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      setenv(name_.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// GPT-2's byte → character map of its byte-level pre-tokenizer, as UTF-8.
inline std::string byte_char(int b) {
  const auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  int code = b;
  if (!printable(b)) {
    code = 256;
    for (int c = 0; c < b; ++c) code += printable(c) ? 0 : 1;
  }
  std::string out;
  if (code < 0x80) {
    out += char(code);
  } else {
    out += char(0xC0 | (code >> 6));
    out += char(0x80 | (code & 0x3F));
  }
  return out;
}

inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
}

// Runs `fn`, expecting it to throw exactly-or-derived `E` whose message holds every needle.
// Returns the message (empty when nothing or something else was thrown: the test fails).
template <class E, class Fn>
std::string expect_throw(Fn&& fn, std::initializer_list<std::string_view> needles) {
  try {
    fn();
  } catch (const E& e) {
    std::string what = e.what();
    for (std::string_view n : needles) {
      EXPECT_TRUE(contains(what, n)) << "message lacks \"" << n << "\": " << what;
    }
    return what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

struct CommandResult {
  int status = -1;  // exit status, or -1 when the command did not exit normally
  std::string out;
  std::string err;
};

// Runs a shell command line, capturing stdout and stderr separately.
inline CommandResult run_command(const std::string& command, const std::string& scratch_dir) {
  const std::string out_path = scratch_dir + "/cmd.stdout";
  const std::string err_path = scratch_dir + "/cmd.stderr";
  const std::string line = command + " >" + out_path + " 2>" + err_path + " </dev/null";
  int raw = std::system(line.c_str());
  CommandResult r;
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

// Runs SQL on a file with the plain SQLite API (no onecat code in the way).
inline void raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in: " << sql;
  sqlite3_free(err);
  sqlite3_close(db);
}

// A command's stdout as JSON; a test failure (and null) when it is not.
inline nlohmann::json parse_json(const CommandResult& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "):\n" << r.out << "\nstderr:\n" << r.err;
    return nullptr;
  }
}

// Cache rows for store tests: an ELF-looking cubin of random bytes seeded by `seed`.
inline std::string fake_cubin(const std::string& seed, size_t size = 600) {
  std::mt19937 rng(uint32_t(std::hash<std::string>{}(seed)));
  std::string c = "\x7f" "ELF";
  while (c.size() < size) c.push_back(char(rng()));
  return c;
}

// A store row with every field set (an ELF-looking cubin of random bytes).
inline KernelBinary make_binary(const std::string& key, const std::string& arch = "sm_70", int hidden = 4096,
                         size_t cubin_size = 600) {
  KernelBinary b;
  b.key = key;
  b.family = "rmsnorm";
  b.spec = "rmsnorm:hidden=" + std::to_string(hidden) + ",dtype=f16,residual=1";
  b.config = "row_threads=256,vec=8,rows=1";
  b.arch = arch;
  b.nvrtc_version = "12.8";
  b.options = "--gpu-architecture=" + arch + " -std=c++17 --ptxas-options=-v";
  b.cubin = fake_cubin(key, cubin_size);
  b.lowered_name = "_ZN6onecat14rmsnorm_kernelILi4096ELb1ELi256ELi8ELi1EEEvPNS_6half_tEPKS1_S2_S4_fi";
  b.usage.registers = 40;
  b.usage.shared_bytes = 32;
  b.usage.spill_store_bytes = 4;
  b.usage.spill_load_bytes = 8;
  b.usage.stack_bytes = 16;
  b.usage.barriers = 1;
  b.compile_ms = 123.5;
  return b;
}

}  // namespace onecat::test
