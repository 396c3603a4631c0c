#include "egress/reaper.h"

#include <utility>

namespace sandfence {

Reaper::~Reaper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // The thread returns only once the queue is empty, and every Post
  // starts one: after the join nothing is left to run.
  if (thread_.joinable()) thread_.join();
}

void Reaper::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void Reaper::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Reaper* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
        return r->queue_.empty() && r->running_ == 0;
      },
      this));
}

size_t Reaper::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + running_;
}

void Reaper::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](Reaper* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
          return !r->queue_.empty() || r->stopping_;
        },
        this));
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mu_.Unlock();
    work();
    mu_.Lock();
    --running_;
  }
}

}  // namespace sandfence
