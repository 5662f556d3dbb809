// A progress bar over checkpoint bytes on stderr, in the style of the CLI's: redrawn in place
// on a terminal, a line per quarter otherwise; silent when disabled (tests, libraries).
#pragma once
#include <cstddef>
#include <mutex>
#include <string>

namespace onecat::models {

class LoadProgress {
 public:
  LoadProgress(std::string what, size_t total_bytes, bool enabled);
  void advance(size_t bytes);  // thread-safe
  void done();
  double seconds() const;  // since construction

 private:
  std::mutex mutex_;
  std::string what_;
  size_t total_, count_ = 0;
  int last_quarter_ = 0;
  bool enabled_, tty_;
  double start_;
};

}  // namespace onecat::models
