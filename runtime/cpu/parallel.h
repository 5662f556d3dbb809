// parallel_for(n, fn): fn(i) for i in [0, n) on every hardware thread, each index once, in no
// particular order; parallel_chunks: the same over fixed chunks of indices. For the CPU
// references and checks, whose work items (rows, tokens, outputs) are independent.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace onecat::cpu {

template <typename Fn>
void parallel_for(int64_t n, Fn&& fn) {
  const int64_t threads = std::min<int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;  // stop handing out work
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// fn(begin, end) over [0, n) in fixed chunks of `chunk` indices, the chunks in parallel; chunk
// c is [c·chunk, min(n, (c+1)·chunk)), so per-chunk results can be combined in a fixed order.
template <typename Fn>
void parallel_chunks(int64_t n, int64_t chunk, Fn&& fn) {
  parallel_for((n + chunk - 1) / chunk, [&](int64_t c) { fn(c * chunk, std::min(n, (c + 1) * chunk)); });
}

}  // namespace onecat::cpu
