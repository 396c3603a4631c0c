#include "daemon/call_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {

CallPool::CallPool(size_t workers, size_t queue)
    : workers_(workers == 0 ? 1 : workers), queue_limit_(queue) {
  threads_.reserve(workers_);
  for (size_t i = 0; i < workers_; ++i) {
    threads_.emplace_back([this] { Work(); });
  }
}

CallPool::~CallPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

absl::Status CallPool::Submit(std::function<void()> call) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return Unavailable("the daemon is stopping");
  if (running_ + queue_.size() >= workers_ + queue_limit_) {
    ++refused_;
    return WithSubject(
        Unavailable(absl::StrCat("the daemon is busy: ", running_,
                                 " calls running and ", queue_.size(),
                                 " waiting (its limit); retry")),
        {"", "", "", "the daemon is busy"});
  }
  queue_.push_back(std::move(call));
  return absl::OkStatus();
}

size_t CallPool::in_flight() const {
  absl::MutexLock lock(&mu_);
  return running_ + queue_.size();
}

uint64_t CallPool::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

void CallPool::Work() {
  for (;;) {
    std::function<void()> call;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CallPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      call = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    call();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace sandfence
