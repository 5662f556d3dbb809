// The onecat command line, run as a separate process in a private cache directory.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
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

// The processes whose parent is `parent`, from /proc (field 4 of /proc/PID/stat).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == parent) {
      out.push_back(pid_t(std::stol(name)));
    }
  }
  return out;
}

// Whether pid still runs: it exists and is not a zombie.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' && line[close + 2] != 'X';
}

TEST_F(Cli, KillingAParallelCompileKillsItsWorkers) {
  // Every candidate of a gemm spec: far more than the workers finish before the kill.
  const std::vector<std::string> args = {ONECAT_BIN, "compile", "gemm:n=4096,k=4096,fmt=awq4", "--all-configs",
                                         "--arch", "sm_70", "--jobs", "2", "--parallel", "processes"};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
  pid_t parent = 0;
  ASSERT_EQ(posix_spawn(&parent, ONECAT_BIN, &files, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&files);

  std::vector<pid_t> workers;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       workers.size() < 2 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    workers = children_of(parent);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the workers are compiling
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  ASSERT_EQ(workers.size(), 2u) << "the compile started its two workers";

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto any_running = [&] { return std::any_of(workers.begin(), workers.end(), running); };
  while (any_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t w : workers) {
    EXPECT_FALSE(running(w)) << "worker " << w << " still runs after its parent was killed";
    if (running(w)) kill(w, SIGKILL);  // leave nothing behind (the pid was checked just now)
  }
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

TEST_F(Cli, UsageErrorsExitWithStatus2AndNameTheArgument) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"", {"onecat needs a command: ", "compile", "cache", "(onecat --help)"}},
      {"frobnicate", {"unknown command 'frobnicate' for onecat; use ", "compile"}},
      {"cache frob --json", {"unknown command 'frob' for onecat cache; use ", "export", "(onecat cache --help)"}},
      {"cache", {"onecat cache needs a command: ", "verify"}},
      {"compile", {"onecat compile: ", "spec is required", "(onecat compile --help)"}},
      {"compile x --arch", {"onecat compile: ", "--arch"}},
      {"compile x --jobs 0", {"onecat compile: ", "--jobs", "0"}},
      {"compile x --parallel bogus", {"onecat compile: ", "--parallel", "bogus"}},
      {"compile x --bogus", {"onecat compile: ", "--bogus"}},
      {"emit a b", {"onecat emit: ", "spec"}},
      {"check x --rows abc", {"onecat check: ", "--rows", "abc"}},
      {"info --json extra", {"onecat info: ", "extra"}},
      {"cache export", {"onecat cache export: ", "FILE is required"}},
  };
  for (const auto& [args, needles] : cases) {
    SCOPED_TRACE(args);
    auto r = onecat(args);
    EXPECT_EQ(r.status, 2) << r.err;
    expect_one_error_line(r);
    for (const auto& needle : needles) EXPECT_TRUE(contains(r.err, needle)) << needle << " missing from: " << r.err;
    EXPECT_FALSE(contains(r.err, "Run with --help")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(cache_file()));
}

TEST_F(Cli, MessagesEchoAtMostAShortPieceOfTheInput) {
  const std::string huge(100'000, 'x');
  const std::string spec = std::string(kSpec) + "," + huge;
  const std::vector<std::string> cases = {
      "compile '" + spec + "' --arch sm_70",
      "emit 'rmsnorm:hidden=" + std::string(100'000, '9') + ",dtype=f16,residual=1'",
      "emit 'rms" + huge + ":hidden=1'",
      "emit 'rmsnorm:hidden=4096,dtype=" + huge + ",residual=1'",
      std::string("emit '") + kSpec + "' --config 'row_threads=" + huge + "'",
      std::string("compile '") + kSpec + "' --arch sm_" + huge,
      std::string("compile '") + kSpec + "' --arch sm_70 --parallel " + huge,
      huge,
      "cache " + huge,
      "info " + huge,
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args.substr(0, 60));
    auto r = onecat(args);
    EXPECT_EQ(r.status, 2) << r.err.substr(0, 300);
    expect_one_error_line(r);
    EXPECT_LT(r.err.size(), 600u) << r.err.substr(0, 600);
  }
}

TEST_F(Cli, CheckWithoutAGpuSaysSo) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  auto r = onecat(std::string("check '") + kSpec + "' --rows 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 2) << "a missing GPU is not bad input";
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "GPU")) << r.err;
  // And `compile` without --arch needs the GPU to know the arch: it says which to name.
  auto native = onecat(std::string("compile '") + kSpec + "'");
  EXPECT_EQ(native.status, 1);
  expect_one_error_line(native);
  EXPECT_TRUE(contains(native.err, "GPU")) << native.err;
  EXPECT_TRUE(contains(native.err, "--arch sm_70")) << native.err;
  EXPECT_TRUE(native.out.empty()) << native.out;
  // tune fails before printing the model's plan, saying what works without a GPU.
  auto prewarm = onecat("tune --model qwen3-8b:awq4 --compile-only");
  EXPECT_EQ(prewarm.status, 1);
  expect_one_error_line(prewarm);
  EXPECT_TRUE(contains(prewarm.err, "--arch sm_70")) << prewarm.err;
  EXPECT_TRUE(prewarm.out.empty()) << "printed before failing:\n" << prewarm.out;
  auto tune = onecat("tune --model qwen3-8b:awq4");
  EXPECT_EQ(tune.status, 1);
  expect_one_error_line(tune);
  EXPECT_TRUE(contains(tune.err, "--compile-only --arch sm_70")) << tune.err;
  EXPECT_TRUE(tune.out.empty()) << "printed before failing:\n" << tune.out;
  // bench takes a spec of any family (through the harness registry); without a GPU it says so.
  for (const std::string& spec : {std::string(kSpec), std::string("gemm:n=256,k=256,fmt=f16"),
                                 std::string("attention:op=decode,heads=8,kv_heads=2,dim=128,page=16,kv=f16")}) {
    SCOPED_TRACE(spec);
    auto bench = onecat("bench '" + spec + "' --m 1,4");
    EXPECT_EQ(bench.status, 1);
    expect_one_error_line(bench);
    EXPECT_TRUE(contains(bench.err, "GPU")) << bench.err;
    EXPECT_TRUE(bench.out.empty()) << bench.out;
  }
  {
    std::ofstream(tmp_ / "points.txt")
        << "gemm:n=256,k=256,fmt=f16 1,17\nattention:op=decode,heads=8,kv_heads=2,dim=128,page=16,kv=f16 1 ctx=2048\n";
  }
  auto shapes = onecat("bench --shapes '" + tmp_ / "points.txt" + "' --sweep");
  EXPECT_EQ(shapes.status, 1);
  expect_one_error_line(shapes);
  EXPECT_TRUE(contains(shapes.err, "GPU")) << shapes.err;
  EXPECT_TRUE(shapes.out.empty()) << shapes.out;
}

// Bad input to bench and tune is reported before any driver call, naming what is known.
TEST_F(Cli, BenchAndTuneRefuseUnknownFamilies) {
  auto bench = onecat("bench 'nope:n=1' --m 1");
  EXPECT_EQ(bench.status, 2);
  expect_one_error_line(bench);
  EXPECT_TRUE(contains(bench.err, "known: rmsnorm, gemm, attention")) << bench.err;
  auto config = onecat(std::string("bench '") + kSpec + "' --config bogus=1");
  EXPECT_EQ(config.status, 2);
  expect_one_error_line(config);
  // --shapes: the file is read and every line checked before any driver call.
  auto missing = onecat("bench --shapes '" + tmp_ / "absent.txt" + "'");
  EXPECT_EQ(missing.status, 2);
  expect_one_error_line(missing);
  EXPECT_TRUE(contains(missing.err, "absent.txt")) << missing.err;
  { std::ofstream(tmp_ / "points.txt") << "gemm:n=256,k=256,fmt=f16 1,17\ngemm:n=256,k=256,fmt=f16 1 ctx=4096\n"; }
  auto misplaced = onecat("bench --shapes '" + tmp_ / "points.txt" + "' --sweep");
  EXPECT_EQ(misplaced.status, 2);
  expect_one_error_line(misplaced);
  EXPECT_TRUE(contains(misplaced.err, "points.txt line 2")) << misplaced.err;
  auto both = onecat(std::string("bench '") + kSpec + "' --shapes '" + tmp_ / "points.txt" + "'");
  EXPECT_EQ(both.status, 2) << both.err;
  auto neither = onecat("bench --m 1");
  EXPECT_EQ(neither.status, 2) << neither.err;
  expect_one_error_line(neither);
  auto tune = onecat("tune --model qwen3-8b:awq4 --families gemm,nope --compile-only --arch sm_70");
  EXPECT_EQ(tune.status, 2);
  expect_one_error_line(tune);
  EXPECT_TRUE(contains(tune.err, "'nope'")) << tune.err;
  EXPECT_TRUE(contains(tune.err, "known: rmsnorm, gemm, attention")) << tune.err;
}

TEST_F(Cli, InfoSaysWhichNvrtcCompilesForWhichArch) {
  auto r = onecat("info --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = parse(r);
  std::set<int> covered;
  for (const auto& n : j["nvrtc"]) {
    ASSERT_TRUE(n.contains("compiles_for")) << n.dump();
    for (int a : n["compiles_for"]) {
      EXPECT_TRUE(covered.insert(a).second) << "sm_" << a << " is claimed by two NVRTCs";
      EXPECT_NE(std::find(n["archs"].begin(), n["archs"].end(), a), n["archs"].end());
    }
  }
  EXPECT_TRUE(covered.count(70)) << "the NVRTC that targets sm_70 says it compiles for it";
  for (const auto& g : j["gpus"]) EXPECT_TRUE(g.contains("nvrtc")) << g.dump();
  auto text = onecat("info");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "compiles for: sm_70")) << text.out;
  EXPECT_TRUE(contains(text.out, "a compile for an arch uses the first NVRTC listed that targets it")) << text.out;
}

// The column of `needle` in each line that has it.
std::vector<size_t> columns_of(const std::string& text, const std::string& needle) {
  std::vector<size_t> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (size_t at = line.find(needle); at != std::string::npos) out.push_back(at);
  }
  return out;
}

TEST_F(Cli, TablesStayAlignedWithLongSpecsAndAHitShowsNoCompileTime) {
  const std::string long_spec = "attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3,kv_scale=head,q=8,window=0";
  const std::string specs = std::string("'") + kSpec + "' 'rmsnorm:hidden=1024,dtype=f16,residual=0' '" + long_spec + "'";
  auto first = onecat("compile " + specs + " --arch sm_70");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_FALSE(contains(first.err, "ETA")) << first.err;
  // The arch column: the header's "arch" and every row's "sm_70" start at the same column.
  const std::vector<size_t> header = columns_of(first.out, " arch ");
  ASSERT_EQ(header.size(), 1u) << first.out;
  const std::vector<size_t> rows = columns_of(first.out, " sm_70 ");
  ASSERT_EQ(rows.size(), 3u) << first.out;
  for (size_t c : rows) EXPECT_EQ(c, header[0]) << first.out;
  EXPECT_EQ(columns_of(first.out, " miss").size(), 3u) << first.out;

  auto second = onecat("compile " + specs + " --arch sm_70");
  ASSERT_EQ(second.status, 0) << second.err;
  std::istringstream lines(second.out);
  int hits = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.ends_with(" hit")) continue;
    ++hits;
    EXPECT_TRUE(line.ends_with(" - hit")) << "a hit compiled nothing: " << line;
    EXPECT_FALSE(contains(line, "ms ")) << line;
  }
  EXPECT_EQ(hits, 3) << second.out;

  auto ls = onecat("cache ls");
  ASSERT_EQ(ls.status, 0) << ls.err;
  const std::vector<size_t> ls_header = columns_of(ls.out, " arch ");
  ASSERT_EQ(ls_header.size(), 1u) << ls.out;
  for (size_t c : columns_of(ls.out, " sm_70 ")) EXPECT_EQ(c, ls_header[0]) << ls.out;
}

// ONECAT_REQUIRE_GPU=1 (every GPU machine's run sets it) turns "GPU tests skipped" into a
// failure, so a broken driver cannot pass as a skip.
TEST_F(Cli, GpuTestsFailWithoutAGpuWhenOneIsRequired) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  const std::string bin = std::string("'") + ONECAT_GPU_TESTS_BIN + "'";
  auto skipped = test::run_command(bin, tmp_.path());
  EXPECT_EQ(skipped.status, 77) << skipped.out;
  EXPECT_TRUE(contains(skipped.out, "SKIP: GPU tests need an NVIDIA GPU")) << skipped.out;
  auto required = test::run_command("ONECAT_REQUIRE_GPU=1 " + bin, tmp_.path());
  EXPECT_EQ(required.status, 1) << required.out;
  EXPECT_TRUE(contains(required.out, "FAIL: ONECAT_REQUIRE_GPU=1, but the GPU tests cannot run")) << required.out;
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
      {"bench", "--graph"},
      {"cache", "verify"},
      {"cache stats", "--json"},
      {"cache ls", "--json"},
      {"cache verify", "--json"},
      {"cache clear", "--force"},
      {"tune", "qwen3-30b-a3b:mxfp4"},  // every built-in model is listed
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
  // Without a command it says what is missing, and fails as malformed input.
  auto none = onecat("");
  EXPECT_EQ(none.status, 2);
  auto unknown = onecat("frobnicate");
  EXPECT_EQ(unknown.status, 2);
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
