// The daemon's unary calls run here: a fixed set of worker threads and a
// bounded queue. A call may take seconds (a start resolves names and loads
// programs), so it must not run on gRPC's own threads; one thread per call
// would let a burst of callers make the daemon as many threads as they
// like. Past `workers` running and `queue` waiting, a call is refused at
// once as UNAVAILABLE ("the daemon is busy"), retryable, instead of
// waiting without bound.
#ifndef SANDFENCE_DAEMON_CALL_POOL_H_
#define SANDFENCE_DAEMON_CALL_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sandfence {

class CallPool {
 public:
  static constexpr size_t kDefaultWorkers = 32;
  static constexpr size_t kDefaultQueue = 1024;

  explicit CallPool(size_t workers = kDefaultWorkers,
                    size_t queue = kDefaultQueue);
  // Runs every call already queued, then joins the workers.
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // Queues `call`; Unavailable (and `call` is dropped, never run) when
  // every worker is busy and the queue is full.
  absl::Status Submit(std::function<void()> call);

  // Calls running or waiting now.
  size_t in_flight() const;
  uint64_t refused() const;
  // Calls it takes at once: workers and queue.
  size_t capacity() const { return workers_ + queue_limit_; }

 private:
  void Work();

  const size_t workers_;
  const size_t queue_limit_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_CALL_POOL_H_
