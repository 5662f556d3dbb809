#include "serve/engine_loop.h"

#include <cstdio>

#include "base/error.h"
#include "runtime/cuda/driver.h"

namespace onecat::serve {

std::vector<Channel::Output> Channel::next() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return ready(); });
  return take();
}

std::optional<std::vector<Channel::Output>> Channel::next_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_until(lock, deadline, [&] { return ready(); })) return std::nullopt;
  return take();
}

std::vector<Channel::Output> Channel::take() {
  if (error_) {
    if (input_error_) throw InputError(*error_);
    throw Error(*error_);
  }
  std::vector<Output> out(outputs_.begin(), outputs_.end());
  outputs_.clear();
  return out;
}

void Channel::push(Output o) {
  {
    std::lock_guard lock(mutex_);
    if (o.step.finished) --unfinished_;
    outputs_.push_back(std::move(o));
  }
  ready_.notify_all();
}

void Channel::fail(std::string message, bool input_error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(message);
    input_error_ = input_error;
  }
  ready_.notify_all();
}

EngineLoop::EngineLoop(model::Model& model, const engine::EngineOptions& options, bool gpu, Metrics& metrics)
    : engine_(model, options), gpu_(gpu), metrics_(metrics), thread_([this] { run(); }) {}

void EngineLoop::publish() {
  const engine::BlockManager& b = engine_.blocks();
  const engine::EngineStats& st = engine_.stats();
  metrics_.engine({.running = engine_.running(),
                   .waiting = engine_.waiting(),
                   .kv_usage = b.pages() > 0 ? 1.0 - double(b.available()) / double(b.pages()) : 0.0,
                   .prompt_tokens = st.prompt_tokens,
                   .prefix_hit_tokens = st.prefix_hit_tokens,
                   .preemptions = st.preemptions,
                   .draft_tokens = st.draft_tokens,
                   .accepted_tokens = st.accepted_tokens,
                   .accepted_at = st.accepted_at});
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<Channel> EngineLoop::submit(std::vector<engine::Request> choices) {
  auto channel = std::make_shared<Channel>();
  channel->unfinished_ = int(choices.size());
  {
    std::lock_guard lock(mutex_);
    active_ += int64_t(choices.size());
    submitted_.push_back({channel, std::move(choices)});
  }
  wake_.notify_all();
  return channel;
}

void EngineLoop::cancel(const std::shared_ptr<Channel>& channel, int choice) {
  {
    std::lock_guard lock(mutex_);
    cancels_.emplace_back(channel, choice);
  }
  wake_.notify_all();
}

void EngineLoop::cancel_all(const std::shared_ptr<Channel>& channel) { cancel(channel, -1); }

int64_t EngineLoop::active() const {
  std::lock_guard lock(mutex_);
  return active_;
}

void EngineLoop::admit(Submission& s) {
  if (!broken_.empty()) {
    s.channel->fail(broken_, false);
    return;
  }
  std::vector<int64_t> ids;
  try {
    for (engine::Request& r : s.choices) ids.push_back(engine_.add(std::move(r)));
  } catch (const std::exception& e) {
    for (int64_t id : ids) engine_.cancel(id);
    // The cancelled ids are reported by the next step; nobody listens to them any more.
    s.channel->fail(e.what(), dynamic_cast<const InputError*>(&e) != nullptr);
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) running_[ids[i]] = {s.channel, int(i)};
}

void EngineLoop::run() {
  if (gpu_) {
    try {
      use_device(0);
    } catch (const std::exception& e) {
      broken_ = std::string("the engine thread cannot use the GPU: ") + e.what();
      std::fprintf(stderr, "onecat serve: %s\n", broken_.c_str());
    }
  }
  for (;;) {
    std::deque<Submission> submitted;
    std::vector<std::pair<std::shared_ptr<Channel>, int>> cancels;
    {
      std::unique_lock lock(mutex_);
      active_ = int64_t(running_.size());
      const bool busy = !engine_.idle();
      wake_.wait(lock, [&] { return busy || stopping_ || !submitted_.empty() || !cancels_.empty(); });
      submitted.swap(submitted_);
      cancels.swap(cancels_);
      if (stopping_ && !busy && submitted.empty()) return;
    }
    for (Submission& s : submitted) admit(s);
    for (const auto& [channel, choice] : cancels) {
      for (const auto& [id, r] : running_) {
        if (r.channel == channel && (choice < 0 || r.choice == choice)) engine_.cancel(id);
      }
    }
    if (engine_.idle()) {
      publish();
      continue;
    }
    std::vector<engine::StepOutput> outputs;
    try {
      outputs = engine_.step();
    } catch (const std::exception& e) {
      // The engine's state after a failed step is unknown: every request in it fails, and
      // each is cancelled so its pages are let go.
      std::fprintf(stderr, "onecat serve: a step failed: %s\n", e.what());
      for (auto& [id, r] : running_) {
        engine_.cancel(id);
        r.channel->fail(std::string("the engine failed: ") + e.what(), false);
      }
      running_.clear();
      continue;
    }
    // Before the outputs go out: a client that reads /metrics after its answer sees the step.
    publish();
    for (engine::StepOutput& o : outputs) {
      const auto it = running_.find(o.id);
      if (it == running_.end()) continue;  // a refused or failed request's cancellation
      const bool finished = o.finished;
      it->second.channel->push({it->second.choice, std::move(o)});
      if (finished) running_.erase(it);
    }
  }
}

}  // namespace onecat::serve
