#include "models/checkpoint/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace onecat::models {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LoadProgress::LoadProgress(std::string what, size_t total_bytes, bool enabled)
    : what_(std::move(what)),
      total_(total_bytes),
      enabled_(enabled),
      tty_(isatty(fileno(stderr))),
      start_(now_seconds()) {}

double LoadProgress::seconds() const { return now_seconds() - start_; }

void LoadProgress::advance(size_t bytes) {
  std::lock_guard lock(mutex_);
  count_ += bytes;
  if (!enabled_ || total_ == 0) return;
  const double gb = 1e9, elapsed = seconds();
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = int(kWidth * std::min(count_, total_) / total_);
    std::fprintf(stderr, "\r%s [%s%s] %.2f/%.2f GB  %.0fs ", what_.c_str(), std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(kWidth - filled), ' ').c_str(), double(count_) / gb, double(total_) / gb, elapsed);
  } else if (int(4 * count_ / total_) > last_quarter_) {
    last_quarter_ = int(4 * count_ / total_);
    std::fprintf(stderr, "%s: %.2f/%.2f GB after %.0fs\n", what_.c_str(), double(count_) / gb, double(total_) / gb,
                 elapsed);
  }
}

void LoadProgress::done() {
  if (enabled_ && tty_) std::fprintf(stderr, "\n");
}

}  // namespace onecat::models
