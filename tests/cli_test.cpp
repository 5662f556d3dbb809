// The onecat command line, run as a separate process in a private cache directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace onecat {
namespace {

using test::contains;
using test::TempDir;

const char* const kSpec = "rmsnorm:hidden=4096,dtype=f16,residual=1";

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(ONECAT_BIN)) << ONECAT_BIN; }

  // Runs `onecat <args>` with ONECAT_CACHE_DIR pointing into this test's directory.
  test::CommandResult onecat(const std::string& args) {
    return test::run_command(std::string("'") + ONECAT_BIN + "' " + args, tmp_.path());
  }
  static nlohmann::json parse(const test::CommandResult& r) { return test::parse_json(r); }
  std::string cache_file() const { return tmp_ / "cache/kernels.sqlite"; }
  bool has_gpu() {
    auto r = onecat("info --json");
    nlohmann::json j = parse(r);
    return j.is_object() && j.contains("gpus") && !j["gpus"].empty();
  }

  TempDir tmp_;
  test::ScopedEnv cache_env_{"ONECAT_CACHE_DIR", tmp_ / "cache"};
  test::ScopedEnv nvrtc_env_{"ONECAT_NVRTC", std::nullopt};
  test::ScopedEnv debug_env_{"ONECAT_DEBUG", std::nullopt};  // keeps stderr to the error line
};

// Every error is one line "onecat: error: …" on stderr.
void expect_one_error_line(const test::CommandResult& r) {
  EXPECT_TRUE(r.err.starts_with("onecat: error: ")) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
}

TEST_F(Cli, InfoJsonHasTheDocumentedKeys) {
  auto r = onecat("info --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = parse(r);
  ASSERT_TRUE(j.is_object());
  for (const char* key : {"driver", "gpus", "nvrtc", "cache"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["gpus"].is_array());
  if (j["driver"].is_null()) {
    EXPECT_TRUE(j["gpus"].empty());
  }
  ASSERT_TRUE(j["nvrtc"].is_array());
  ASSERT_FALSE(j["nvrtc"].empty());
  bool volta = false;
  for (const auto& n : j["nvrtc"]) {
    EXPECT_FALSE(n["version"].get<std::string>().empty());
    EXPECT_FALSE(n["archs"].empty());
    volta = volta || n["targets_sm_70"].get<bool>();
  }
  EXPECT_TRUE(volta) << "an NVRTC that targets sm_70 is found";
  EXPECT_EQ(j["cache"]["path"], cache_file());
  EXPECT_EQ(j["cache"]["binaries"], 0);

  auto text = onecat("info");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "nvrtc:"));
  EXPECT_TRUE(contains(text.out, "families: rmsnorm"));
  EXPECT_TRUE(contains(text.out, cache_file()));
}

TEST_F(Cli, EmitPrintsTheSource) {
  auto r = onecat(std::string("emit '") + kSpec + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "#include \"rmsnorm/rmsnorm.cuh\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "// spec:   rmsnorm:hidden=4096,dtype=f16,residual=1"));
  EXPECT_TRUE(contains(r.out, "// arch:   sm_70"));
  EXPECT_TRUE(contains(r.out, "// kernel: onecat::rmsnorm_kernel<4096, true, "));

  auto with_config =
      onecat("emit 'rmsnorm:residual=0,dtype=f16,hidden=1024' --config rows=2,vec=4,row_threads=64 --arch sm_90");
  ASSERT_EQ(with_config.status, 0) << with_config.err;
  EXPECT_TRUE(contains(with_config.out, "// spec:   rmsnorm:hidden=1024,dtype=f16,residual=0"));
  EXPECT_TRUE(contains(with_config.out, "// config: row_threads=64,vec=4,rows=2"));
  EXPECT_TRUE(contains(with_config.out, "// arch:   sm_90"));
  EXPECT_TRUE(contains(with_config.out, "// kernel: onecat::rmsnorm_kernel<1024, false, 64, 4, 2>"));

  auto ptx = onecat(std::string("emit '") + kSpec + "' --ptx");
  ASSERT_EQ(ptx.status, 0) << ptx.err;
  EXPECT_TRUE(contains(ptx.out, ".target sm_70"));
  EXPECT_TRUE(contains(ptx.out, "ld.global.nc.v4.u32"));
  EXPECT_FALSE(std::filesystem::exists(cache_file())) << "emit does not touch the cache";
}

TEST_F(Cli, CompileMissesThenHitsAndTheCacheCommandsSeeIt) {
  const std::string cmd = std::string("compile '") + kSpec + "' --arch sm_70 --json";
  auto first = onecat(cmd);
  ASSERT_EQ(first.status, 0) << first.err;
  nlohmann::json a = parse(first);
  ASSERT_EQ(a["kernels"].size(), 1u) << first.out;
  const nlohmann::json& k = a["kernels"][0];
  EXPECT_FALSE(k["cache_hit"].get<bool>());
  EXPECT_EQ(k["spec"], kSpec);
  EXPECT_EQ(k["arch"], "sm_70");
  EXPECT_EQ(k["nvrtc_version"], "12.8");
  EXPECT_GT(k["registers"].get<int>(), 0);
  EXPECT_EQ(k["spill_store_bytes"], 0);
  EXPECT_GT(k["cubin_bytes"].get<int>(), 0);
  EXPECT_TRUE(k["lowered_name"].get<std::string>().starts_with("_ZN6onecat14rmsnorm_kernel"));

  auto second = onecat(cmd);
  ASSERT_EQ(second.status, 0) << second.err;
  nlohmann::json b = parse(second);
  ASSERT_EQ(b["kernels"].size(), 1u);
  EXPECT_TRUE(b["kernels"][0]["cache_hit"].get<bool>());
  EXPECT_EQ(b["kernels"][0]["key"], k["key"]);
  EXPECT_EQ(b["kernels"][0]["cubin_bytes"], k["cubin_bytes"]);

  // --no-cache compiles again and stores nothing new.
  auto uncached = onecat(std::string("compile '") + kSpec + "' --arch sm_90 --no-cache --json");
  ASSERT_EQ(uncached.status, 0) << uncached.err;
  EXPECT_FALSE(parse(uncached)["kernels"][0]["cache_hit"].get<bool>());

  auto stats = onecat("cache stats --json");
  ASSERT_EQ(stats.status, 0) << stats.err;
  nlohmann::json st = parse(stats);
  EXPECT_EQ(st["binaries"], 1);
  EXPECT_EQ(st["by_arch"], (nlohmann::json{{"sm_70", 1}}));
  EXPECT_EQ(st["by_family"], (nlohmann::json{{"rmsnorm", 1}}));
  EXPECT_EQ(st["path"], cache_file());
  EXPECT_GT(st["cubin_bytes"].get<int64_t>(), 0);
  EXPECT_GE(st["schema_version"].get<int>(), 1);

  auto ls = onecat("cache ls --json");
  ASSERT_EQ(ls.status, 0) << ls.err;
  nlohmann::json rows = parse(ls);
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["key"], k["key"]);
  EXPECT_EQ(rows[0]["spec"], kSpec);
  EXPECT_EQ(rows[0]["config"], k["config"]);
  EXPECT_EQ(rows[0]["registers"], k["registers"]);

  auto ls_text = onecat("cache ls");
  ASSERT_EQ(ls_text.status, 0);
  EXPECT_TRUE(contains(ls_text.out, k["key"].get<std::string>().substr(0, 12)));

  auto verify = onecat("cache verify");
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
  EXPECT_TRUE(contains(verify.out, "1 binaries checked, OK")) << verify.out;
  auto verify_json = onecat("cache verify --json");
  EXPECT_EQ(verify_json.status, 0);
  nlohmann::json v = parse(verify_json);
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["checked"], 1);

  auto info = onecat("info --json");
  EXPECT_EQ(parse(info)["cache"]["binaries"], 1);

  auto clear = onecat("cache clear");
  EXPECT_EQ(clear.status, 0) << clear.err;
  EXPECT_TRUE(contains(clear.out, "removed 1 binaries")) << clear.out;
  EXPECT_EQ(parse(onecat("cache stats --json"))["binaries"], 0);
}

TEST_F(Cli, CompileSeveralSpecsInWorkerProcesses) {
  auto r = onecat(
      "compile rmsnorm:hidden=1024,dtype=f16,residual=0 rmsnorm:hidden=1000,dtype=f16,residual=1 --arch sm_70 "
      "--jobs 2 --parallel processes --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = parse(r);
  ASSERT_EQ(j["kernels"].size(), 2u);
  EXPECT_EQ(j["jobs"], 2);
  EXPECT_EQ(j["parallel"], "processes");
  for (const auto& k : j["kernels"]) {
    EXPECT_FALSE(k.contains("error")) << k.dump();
    EXPECT_GT(k["registers"].get<int>(), 0);
  }
  EXPECT_EQ(parse(onecat("cache stats --json"))["binaries"], 2);
}

TEST_F(Cli, MalformedInputExitsWithStatus2AndOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"compile 'rmsnorm:hidden=4k,dtype=f16,residual=1' --arch sm_70", "is not an integer"},
      {"compile 'rmsnorm:hidden=4096,dtype=bf16,residual=1' --arch sm_70", "dtype='bf16'"},
      {"compile 'rmsnorm:hidden=70000,dtype=f16,residual=1' --arch sm_70", "out of range"},
      {"compile 'softmax:n=1' --arch sm_70", "unknown kernel family 'softmax'"},
      {"compile 'hidden=4096' --arch sm_70", "has no family"},
      {std::string("compile '") + kSpec + "' --arch sm_60", "older than Volta"},
      {std::string("compile '") + kSpec + "' --arch banana", "is not a GPU architecture"},
      {std::string("compile '") + kSpec + "' --arch sm_70 --config row_threads=128,vec=3,rows=1", "vec must be"},
      {"emit 'rmsnorm:hidden=4096,dtype=f16,residual=1,'", "is not key=value"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    auto r = onecat(args);
    EXPECT_EQ(r.status, 2) << r.err;
    expect_one_error_line(r);
    EXPECT_TRUE(contains(r.err, needle)) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(cache_file())) << "bad input leaves no cache behind";
}

TEST_F(Cli, CheckWithoutAGpuSaysSo) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  auto r = onecat(std::string("check '") + kSpec + "' --rows 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 2) << "a missing GPU is not bad input";
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "GPU")) << r.err;
  // And `compile` without --arch needs the GPU to know the arch.
  auto native = onecat(std::string("compile '") + kSpec + "'");
  EXPECT_NE(native.status, 0);
  EXPECT_TRUE(contains(native.err, "GPU")) << native.err;
}

TEST_F(Cli, DamagedCacheFileIsReportedAndCanBeCleared) {
  // Create a real cache first, then overwrite it with garbage.
  ASSERT_EQ(onecat("cache stats").status, 0);
  ASSERT_TRUE(std::filesystem::exists(cache_file()));
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = char((i * 2654435761u) >> 13);
  test::write_file(cache_file(), junk);
  std::filesystem::remove(cache_file() + "-wal");
  std::filesystem::remove(cache_file() + "-shm");

  auto verify = onecat("cache verify");
  EXPECT_NE(verify.status, 0);
  expect_one_error_line(verify);
  EXPECT_TRUE(contains(verify.err, "is damaged or not an SQLite file")) << verify.err;
  EXPECT_TRUE(contains(verify.err, "cache clear --force")) << verify.err;

  auto stats = onecat("cache stats");
  EXPECT_NE(stats.status, 0);
  EXPECT_TRUE(contains(stats.err, "damaged")) << stats.err;

  auto info = onecat("info --json");
  EXPECT_EQ(info.status, 0) << "info reports a damaged cache instead of failing";
  EXPECT_TRUE(contains(parse(info)["cache"]["error"].get<std::string>(), "damaged"));

  auto clear = onecat("cache clear");
  EXPECT_NE(clear.status, 0);
  EXPECT_TRUE(contains(clear.err, "damaged")) << clear.err;
  EXPECT_EQ(test::read_file(cache_file()), junk) << "clear without --force leaves the file alone";

  auto forced = onecat("cache clear --force");
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_TRUE(contains(forced.out, "removed " + cache_file())) << forced.out;
  EXPECT_FALSE(std::filesystem::exists(cache_file()));

  auto again = onecat("cache stats --json");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(parse(again)["binaries"], 0);
  EXPECT_EQ(onecat("cache verify").status, 0);
}

TEST_F(Cli, HelpWorksForEveryCommand) {
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"", "Subcommands:"},
      {"info", "--json"},
      {"emit", "--ptx"},
      {"compile", "--all-configs"},
      {"check", "--rows"},
      {"cache", "verify"},
      {"cache stats", "--json"},
      {"cache ls", "--json"},
      {"cache verify", "--json"},
      {"cache clear", "--force"},
      {"tokenize", "--no-special"},
      {"detokenize", "--skip-special"},
  };
  for (const auto& [cmd, needle] : commands) {
    SCOPED_TRACE(cmd);
    auto r = onecat(cmd + (cmd.empty() ? "" : " ") + "--help");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Usage:")) << r.out;
    EXPECT_TRUE(contains(r.out, needle)) << r.out;
  }
  // Without a command it says what is missing, and fails.
  auto none = onecat("");
  EXPECT_NE(none.status, 0);
  auto unknown = onecat("frobnicate");
  EXPECT_NE(unknown.status, 0);
  EXPECT_FALSE(std::filesystem::exists(cache_file()));
}

// A byte-level BPE tokenizer.json with one special token, enough for the text commands.
void write_tiny_tokenizer(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  test::write_file(dir / "tokenizer.json", R"({"added_tokens": [{"id": 5, "content": "<eos>", "special": true}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "decoder": {"type": "ByteLevel"},
    "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
      {"SpecialToken": {"id": "<eos>", "type_id": 0}}], "special_tokens": {"<eos>": {"id": "<eos>", "ids": [5]}}},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "<eos>": 5},
              "merges": ["a b", "\u0120 ab"]}})");
}

TEST_F(Cli, TokenizeAndDetokenize) {
  auto dir = tmp_ / "tok";
  write_tiny_tokenizer(dir);
  auto r = onecat("tokenize --model '" + dir + "' --text 'ab ab'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "2 4 5\n");
  r = onecat("tokenize --model '" + dir + "' --text 'ab ab' --no-special --json");
  EXPECT_EQ(parse(r)["ids"], nlohmann::json({2, 4}));
  r = onecat("detokenize --model '" + dir + "' --ids 2,4,5 --skip-special --json");
  EXPECT_EQ(parse(r)["text"], "ab ab");
  r = onecat("detokenize --model '" + dir + "' --ids 2,4,5 --stream --json");
  EXPECT_EQ(parse(r)["text"], "ab ab<eos>");

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"tokenize --model '" + (tmp_ / "missing") + "' --text x", "does not exist"},
      {"detokenize --model '" + dir + "' --ids 1,x", "'x' is not one"},
      {"detokenize --model '" + dir + "' --ids 99", "not in the vocabulary"},
      {"detokenize --model '" + dir + "'", "needs --ids"},
  };
  for (const auto& [args, needle] : bad) {
    SCOPED_TRACE(args);
    auto e = onecat(args);
    EXPECT_EQ(e.status, 2) << e.err;
    expect_one_error_line(e);
    EXPECT_TRUE(contains(e.err, needle)) << e.err;
  }
}

}  // namespace
}  // namespace onecat
