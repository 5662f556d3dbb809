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

LoadProgress::LoadProgress(std::string what, size_t total, bool enabled, const char* unit)
    : what_(std::move(what)),
      unit_(unit),
      total_(total),
      enabled_(enabled),
      tty_(isatty(fileno(stderr))),
      start_(now_seconds()) {}

double LoadProgress::seconds() const { return now_seconds() - start_; }

void LoadProgress::advance(size_t amount) {
  std::lock_guard lock(mutex_);
  count_ += amount;
  if (!enabled_ || total_ == 0) return;
  const double elapsed = seconds();
  char counts[64];
  if (unit_) {
    std::snprintf(counts, sizeof counts, "%zu/%zu %s", count_, total_, unit_);
  } else {
    std::snprintf(counts, sizeof counts, "%.2f/%.2f GB", double(count_) / 1e9, double(total_) / 1e9);
  }
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = int(kWidth * std::min(count_, total_) / total_);
    std::fprintf(stderr, "\r%s [%s%s] %s  %.0fs ", what_.c_str(), std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(kWidth - filled), ' ').c_str(), counts, elapsed);
  } else if (int(4 * count_ / total_) > last_quarter_) {
    last_quarter_ = int(4 * count_ / total_);
    std::fprintf(stderr, "%s: %s after %.0fs\n", what_.c_str(), counts, elapsed);
  }
}

void LoadProgress::done() {
  if (enabled_ && tty_) std::fprintf(stderr, "\n");
}

}  // namespace onecat::models
