// ARCHITECTURE rule 8: the same spec, config, templates and NVRTC give the same cubin bytes
// in any process. Every family's kernels (each op, KV type, weight format and strategy) are
// compiled in two worker processes and compared byte for byte, and a store holding them all
// goes through the fleet workflow: export, then import --verify on another cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/jit/service.h"
#include "tests/test_util.h"

namespace onecat {
namespace {

using test::TempDir;

// Requests covering every template body of every family: the defaults for a few token counts
// (gemm: gemv, wmma mma on sm_70; gemv, tc_small, both m16n8k16 pipelines on sm_90), every
// attention op and KV type, the split-K variants the defaults leave out, and both sampling ops.
std::vector<CompileRequest> every_family_and_op() {
  std::vector<CompileRequest> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& spec, const std::string& config, Arch arch) {
    const Family& f = family_of(spec);
    CompileRequest r = CompileRequest::make(f, spec, config, arch);
    if (seen.insert(r.spec + "|" + r.config + "|" + arch.name()).second) out.push_back(std::move(r));
  };
  auto add_defaults = [&](const std::string& spec, std::initializer_list<int64_t> ms, Arch arch) {
    for (int64_t m : ms) add(spec, family_of(spec).default_config(spec, m, arch), arch);
  };
  const Arch sm70{70}, sm90{90};

  add_defaults("rmsnorm:hidden=4096,dtype=f16,residual=1", {1}, sm70);
  add_defaults("rmsnorm:hidden=1000,dtype=f16,residual=0", {1, 64}, sm70);

  for (const char* fmt : {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}) {
    add_defaults(std::string("gemm:n=2048,k=1024,fmt=") + fmt, {1, 512}, sm70);
  }
  add_defaults("gemm:n=2048,k=1024,fmt=gptq4,act_order=1", {1}, sm70);
  add_defaults("gemm:n=4096,k=1024,fmt=awq4,epi=silu_mul", {1}, sm70);
  add_defaults("gemm:n=2048,k=1024,fmt=f16,out=f32,epi=residual", {512}, sm70);
  add_defaults("gemm:n=2048,k=1024,fmt=fp8b128,epi=bias", {1}, sm70);
  add("gemm:n=2048,k=4096,fmt=awq4", "strategy=mma,atom=wmma,bm=64,bn=128,wm=2,wn=2,split=2", sm70);
  add_defaults("gemm:n=2048,k=1024,fmt=awq4", {1, 8, 512}, sm90);
  add("gemm:n=2048,k=1024,fmt=nvfp4", "strategy=mma,atom=m16n8k16,bm=128,bn=128,wm=2,wn=2,bk=32,stages=4", sm90);
  add("gemm:n=2048,k=4096,fmt=f16", "strategy=tc_small,mt=16,rows=64,warps=4,stages=3,split=4", sm90);

  for (const char* kv : {"f16", "e4m3", "e5m2"}) {
    const std::string tail = std::string(",heads=16,kv_heads=4,dim=128,page=16,kv=") + kv;
    add_defaults("attention:op=decode" + tail, {1}, sm70);
    add_defaults("attention:op=verify" + tail + ",q=4", {1}, sm70);
    add_defaults("attention:op=prefill" + tail, {1}, sm70);
    add_defaults(std::string("attention:op=kv_write,kv_heads=4,dim=128,page=16,kv=") + kv, {1}, sm70);
  }
  add_defaults("attention:op=decode,heads=16,kv_heads=4,dim=128,page=16,kv=e4m3", {1}, sm90);
  add_defaults("attention:op=prefill,heads=16,kv_heads=4,dim=128,page=16,kv=f16", {1}, sm90);

  add_defaults("embedding:vocab=32000,hidden=4096", {1}, sm70);
  add_defaults("rope:heads=16,kv_heads=4,dim=128,qk_norm=1,kv_out=dense", {1}, sm70);
  add_defaults("rope:heads=16,kv_heads=4,dim=128,qk_norm=0,kv_out=pages,page=16,kv=e4m3", {1}, sm70);
  add_defaults("rope:heads=16,kv_heads=4,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16", {1}, sm90);
  add_defaults("sampling:op=sample,vocab=1000,logprobs=20", {1}, sm70);
  add_defaults("sampling:op=argmax,vocab=1000", {1, 512}, sm70);  // split and not
  add_defaults("moe:op=route,experts=64,topk=4,norm=1", {1}, sm70);
  add_defaults("moe:op=gate_up,experts=64,topk=4,hidden=1024,inter=256,fmt=awq4", {1, 512}, sm70);
  add_defaults("moe:op=down,experts=64,topk=4,hidden=1024,inter=256,fmt=nvfp4", {1}, sm90);
  add_defaults("moe:op=combine,topk=4,hidden=1024", {1}, sm70);
  return out;
}

// Compiles the requests into a store at `path` in a worker process of its own (a fork:
// another pid, as on another build box), two at a time. Returns the worker's exit status.
int compile_in_another_process(const std::vector<CompileRequest>& requests, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    int status = 0;
    try {
      Store store(path);
      JitService jit(&store);
      for (const CompileResult& r : jit.get_all(requests, 2, Parallelism::kThreads)) {
        if (!r.error.empty()) {
          std::fprintf(stderr, "%s\n", r.error.c_str());
          status = 1;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      status = 1;
    }
    _exit(status);
  }
  if (pid < 0) return -1;
  int raw = 0;
  waitpid(pid, &raw, 0);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

// NVRTC's name for an internal-linkage symbol: "_INTERNAL_<…>_<file>_cu_<hash>_<pid>…".
std::string internal_symbol(const std::string& cubin) {
  const size_t at = cubin.find("_INTERNAL_");
  if (at == std::string::npos) return "";
  size_t end = at;
  while (end < cubin.size() && cubin[end] != '\0') ++end;
  return cubin.substr(at, std::min<size_t>(end - at, 120));
}

class Determinism : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    requests_ = new std::vector<CompileRequest>(every_family_and_op());
    first_status_ = compile_in_another_process(*requests_, *dir_ / "first/kernels.sqlite");
    second_status_ = compile_in_another_process(*requests_, *dir_ / "second/kernels.sqlite");
  }
  static void TearDownTestSuite() {
    delete requests_;
    delete dir_;
  }

  // key → binary (with its cubin) of a store the workers filled.
  static std::map<std::string, KernelBinary> binaries(const std::string& path) {
    Store store(path);
    std::map<std::string, KernelBinary> out;
    for (const KernelBinary& row : store.list_binaries()) out[row.key] = *store.find_binary(row.key);
    return out;
  }

  static TempDir* dir_;
  static std::vector<CompileRequest>* requests_;
  static int first_status_, second_status_;
};

TempDir* Determinism::dir_ = nullptr;
std::vector<CompileRequest>* Determinism::requests_ = nullptr;
int Determinism::first_status_ = -1;
int Determinism::second_status_ = -1;

TEST_F(Determinism, EveryFamilyGivesTheSameCubinInTwoProcesses) {
  ASSERT_EQ(first_status_, 0);
  ASSERT_EQ(second_status_, 0);
  const auto first = binaries(*dir_ / "first/kernels.sqlite");
  const auto second = binaries(*dir_ / "second/kernels.sqlite");
  ASSERT_EQ(first.size(), requests_->size());
  ASSERT_EQ(second.size(), requests_->size());
  std::set<std::string> families, attention_ops;
  for (const auto& [key, a] : first) {
    SCOPED_TRACE(a.spec + " [" + a.config + "] " + a.arch);
    families.insert(a.family);
    if (a.family == "attention") attention_ops.insert(a.spec.substr(0, a.spec.find(',')));
    ASSERT_TRUE(second.count(key));
    const KernelBinary& b = second.at(key);
    EXPECT_TRUE(a.cubin == b.cubin) << "the cubins differ (" << a.cubin.size() << " and " << b.cubin.size()
                                    << " bytes); internal-linkage symbols: " << internal_symbol(a.cubin) << " / "
                                    << internal_symbol(b.cubin);
    EXPECT_EQ(internal_symbol(a.cubin), "") << "a template declares something with internal linkage (docs/codegen.md)";
  }
  std::set<std::string> registered;  // every family of the registry is covered
  for (const Family* f : all_families()) registered.insert(std::string(f->name()));
  EXPECT_EQ(families, registered);
  EXPECT_EQ(attention_ops.size(), 4u);
}

TEST_F(Determinism, AnExportOfEveryFamilyImportsWithVerify) {
  ASSERT_EQ(first_status_, 0);
  const std::string file = *dir_ / "fleet.onecat";
  auto run = [&](const std::string& args, const std::string& cache) {
    return test::run_command("ONECAT_CACHE_DIR='" + cache + "' '" + std::string(ONECAT_BIN) + "' " + args,
                             dir_->path());
  };
  auto exported = run("cache export '" + file + "' --json", *dir_ / "first");
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_EQ(test::parse_json(exported)["binaries"], requests_->size());

  auto imported = run("cache import '" + file + "' --verify --json", *dir_ / "fleet");
  EXPECT_EQ(imported.status, 0) << imported.err;
  const nlohmann::json j = test::parse_json(imported);
  EXPECT_EQ(j["imported"], true) << imported.out;
  EXPECT_EQ(j["binaries_added"], requests_->size());
  ASSERT_EQ(j["verification"].size(), requests_->size());
  for (const auto& v : j["verification"]) EXPECT_EQ(v["ok"], true) << v.dump();
}

}  // namespace
}  // namespace onecat
