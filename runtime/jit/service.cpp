#include "runtime/jit/service.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "runtime/jit/debug.h"

namespace onecat {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CompileResult JitService::get(const CompileRequest& req) {
  const NvrtcRegistry& registry = NvrtcRegistry::get();  // discovery once per process, not timed
  const auto start = std::chrono::steady_clock::now();
  const NvrtcLib& nvrtc = registry.for_arch(req.arch);
  CompileResult r;
  bool corrupt = false;
  if (store_) {
    try {
      if (auto hit = store_->find_binary(binary_key(req, nvrtc.version(), nvrtc_options(req.arch)))) {
        r.binary = std::move(*hit);
        r.cache_hit = true;
        r.elapsed_ms = ms_since(start);
        debug_log("cache hit " + r.binary.key.substr(0, 16) + " " + req.spec + " [" + req.config + "] " + req.arch.name());
        return r;
      }
    } catch (const CorruptEntry& e) {
      // Never load it: say so once, recompile, and put the good binary in its place.
      std::fprintf(stderr, "onecat: error: %s; recompiling it\n", e.what());
      corrupt = true;
    }
  }
  r.binary = compile_kernel(req, nvrtc);
  bool written = false;
  if (store_ && corrupt) {
    store_->replace_binary(r.binary);
    written = !store_->read_only();
  } else if (store_) {
    written = store_->put_binary(r.binary);
  }
  r.elapsed_ms = ms_since(start);
  debug_log("compiled " + r.binary.key.substr(0, 16) + " " + req.spec + " [" + req.config + "] " + req.arch.name() +
            " with NVRTC " + nvrtc.version() + " in " + std::to_string(int(r.binary.compile_ms)) + " ms" +
            (written ? ", stored" : ""));
  return r;
}

std::vector<CompileResult> JitService::get_all(const std::vector<CompileRequest>& requests, int jobs, Parallelism mode,
                                               const std::function<void(size_t)>& on_done) {
  std::vector<CompileResult> results(requests.size());
  jobs = std::max(1, std::min<int>(jobs, int(requests.size())));
  std::mutex done_mutex;
  auto finish = [&](size_t i) {
    if (!on_done) return;
    std::lock_guard lock(done_mutex);
    on_done(i);
  };

  if (mode == Parallelism::kProcesses && store_ && jobs > 1) {
    // Each worker compiles its share into the store through its own connection; the
    // parent then reads every result back, so a worker that died costs only a retry here.
    std::vector<pid_t> workers;
    const std::string path = store_->path();
    const pid_t parent = getpid();
    for (int w = 0; w < jobs; ++w) {
      pid_t pid = fork();
      if (pid == 0) {
        // A worker dies with its parent: a killed `onecat compile` leaves nothing compiling
        // and writing behind. The signal comes when the forking thread ends, which here is the
        // one that waits for the workers. The parent may have died before prctl took effect.
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
        int status = 0;
        try {
          Store store(path);
          JitService child(&store);
          for (size_t i = w; i < requests.size(); i += jobs) {
            try {
              child.get(requests[i]);
            } catch (const Error&) {
              status = 1;  // the parent recompiles it and reports the error
            }
          }
        } catch (...) {
          status = 1;
        }
        _exit(status);
      }
      if (pid < 0) throw Error("cannot start a compile worker process (fork failed)");
      workers.push_back(pid);
    }
    for (pid_t pid : workers) waitpid(pid, nullptr, 0);
  }

  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < requests.size();) {
      try {
        results[i] = get(requests[i]);
      } catch (const Error& e) {
        results[i].error = e.what();
      }
      finish(i);
    }
  };
  const int threads = mode == Parallelism::kThreads ? jobs : 1;
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return results;
}

}  // namespace onecat
