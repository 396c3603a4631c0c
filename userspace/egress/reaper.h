// Deletes what a phase switch left behind (the old generation's rule and
// learned entries) on a thread of its own, after the switch has returned:
// nothing refers to a dead generation once the sandbox's entry names the
// new one, so its deletion need not hold up the reply (issue 18: the
// switch's latency was half deletion).
#ifndef SANDFENCE_EGRESS_REAPER_H_
#define SANDFENCE_EGRESS_REAPER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sandfence {

class Reaper {
 public:
  Reaper() = default;
  // Runs what is still queued, then stops the thread.
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Queues work; the thread starts with the first.
  void Post(std::function<void()> work);
  // Returns once everything posted before the call has run: a map that is
  // full of dead generations is emptied before a write is retried.
  void Drain();
  // Work queued or running.
  size_t pending() const;

 private:
  void Run();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first Post
};

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_REAPER_H_
