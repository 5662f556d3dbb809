// A progress bar on stderr over checkpoint bytes, or over a count of `unit` (kernels prepared,
// graphs captured), in the style of the CLI's: redrawn in place on a terminal, a line per
// quarter otherwise; silent when disabled (tests, libraries).
#pragma once
#include <cstddef>
#include <mutex>
#include <string>

namespace onecat::models {

class LoadProgress {
 public:
  // unit null: bytes, shown in GB.
  LoadProgress(std::string what, size_t total, bool enabled, const char* unit = nullptr);
  void advance(size_t amount);  // thread-safe
  void done();
  double seconds() const;  // since construction

 private:
  std::mutex mutex_;
  std::string what_;
  const char* unit_;
  size_t total_, count_ = 0;
  int last_quarter_ = 0;
  bool enabled_, tty_;
  double start_;
};

}  // namespace onecat::models
