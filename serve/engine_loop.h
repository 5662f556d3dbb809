// The one thread that owns the Engine (it is not thread-safe). HTTP handler threads submit a
// request's choices (one engine::Request each) through a mutex-protected queue and read their
// outputs from the request's own Channel, waiting on its condition variable. cancel() asks the
// engine thread to end choices early (a stop string was found, the client went away); their
// pages are let go at once.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "serve/metrics.h"

namespace onecat::serve {

// One HTTP request's outputs: every choice's StepOutputs in the order the engine made them.
class Channel {
 public:
  struct Output {
    int choice;
    engine::StepOutput step;
  };
  // Waits for the outputs made since the last call (empty once every choice has finished).
  // An engine error (a refused request, a failed step) is thrown here as InputError or Error.
  std::vector<Output> next();
  // The same, but waits no later than `deadline`: nullopt when it passed with nothing new.
  std::optional<std::vector<Output>> next_until(std::chrono::steady_clock::time_point deadline);

 private:
  friend class EngineLoop;
  bool ready() const { return !outputs_.empty() || unfinished_ == 0 || error_; }
  std::vector<Output> take();  // with mutex_ held and ready()
  void push(Output o);
  void fail(std::string message, bool input_error);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Output> outputs_;
  int unfinished_ = 0;
  std::optional<std::string> error_;
  bool input_error_ = false;
};

class EngineLoop {
 public:
  // With a GPU model, the engine thread makes GPU 0's context current first (CUDA contexts are
  // per thread; the model was loaded on another).
  // The engine's gauges go to `metrics` after every step.
  EngineLoop(model::Model& model, const engine::EngineOptions& options, bool gpu, Metrics& metrics);
  ~EngineLoop();  // drains: every submitted request runs to its end first

  // Queues the choices of one request (all or none are added: the engine's refusal fails the
  // channel).
  std::shared_ptr<Channel> submit(std::vector<engine::Request> choices);
  // Ends a choice early (no effect once it has finished).
  void cancel(const std::shared_ptr<Channel>& channel, int choice);
  void cancel_all(const std::shared_ptr<Channel>& channel);

  // Choices submitted or running (as of the engine thread's last wake-up).
  int64_t active() const;
  // The decode steps' CUDA graphs the engine captured as it started (Engine::graphs).
  const model::Model::GraphStats& graphs() const { return engine_.graphs(); }
  const model::Model::WarmStats& warm_up() const { return engine_.warm_up(); }

 private:
  struct Submission {
    std::shared_ptr<Channel> channel;
    std::vector<engine::Request> choices;
  };
  struct Running {
    std::shared_ptr<Channel> channel;
    int choice;
  };
  void run();
  void admit(Submission& s);
  void publish();

  engine::Engine engine_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Submission> submitted_;
  // Choice −1: all of the channel's. Held, not pointed to: a freed channel's address could be
  // a new request's by the time the engine thread reads the queue.
  std::vector<std::pair<std::shared_ptr<Channel>, int>> cancels_;
  bool stopping_ = false;
  int64_t active_ = 0;
  std::map<int64_t, Running> running_;  // engine id → its choice (engine thread only)
  bool gpu_;
  Metrics& metrics_;
  std::string broken_;  // why the engine thread cannot run (engine thread only)
  std::thread thread_;
};

}  // namespace onecat::serve
