// A one-thread epoll loop with timers for the DNS filter: the listeners, the
// upstream sockets and the per-query deadlines all run on it, so no query
// ever blocks another.
//
// Everything but Stop() is called on the loop's thread. A handler may add or
// remove any fd or timer, its own included; an event for an fd removed
// earlier in the same round is dropped.
#ifndef SANDFENCE_DNS_EVENT_LOOP_H_
#define SANDFENCE_DNS_EVENT_LOOP_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace sandfence::dns {

class EventLoop {
 public:
  using FdHandler = std::function<void(uint32_t events)>;
  using TimerId = uint64_t;

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` (not owned) for `events` (EPOLLIN, EPOLLOUT, ...).
  absl::Status Add(int fd, uint32_t events, FdHandler handler);
  absl::Status Modify(int fd, uint32_t events);
  void Remove(int fd);
  // Like Remove, for an fd about to be closed: closing it takes it out of
  // the epoll set, so this spares the epoll_ctl call (the fd must not have
  // been dup'ed).
  void Forget(int fd);

  // Calls `fn` once at `deadline` (or the first round after it).
  TimerId AddTimer(absl::Time deadline, std::function<void()> fn);
  void CancelTimer(TimerId id);

  // One round: waits at most `max_wait` for events, then runs the ready
  // handlers and the due timers.
  absl::Status RunOnce(absl::Duration max_wait);
  // Rounds until Stop(); returns the first error of epoll_wait.
  absl::Status Run();
  // Makes Run() return; callable from any thread.
  void Stop();
  // Runs `fn` on the loop's thread in its next round; callable from any
  // thread (the only way to touch the loop while Run() runs elsewhere).
  void Post(std::function<void()> fn);

  // The time at the start of the current round.
  absl::Time now() const { return now_; }

 private:
  EventLoop(UniqueFd epoll, UniqueFd wake)
      : epoll_(std::move(epoll)), wake_(std::move(wake)) {}

  struct Watch {
    uint64_t token;
    FdHandler handler;
  };

  UniqueFd epoll_;
  UniqueFd wake_;  // an eventfd: Stop() and Post() write it
  absl::flat_hash_map<int, Watch> watches_;
  absl::flat_hash_map<uint64_t, int> tokens_;  // live token -> fd
  uint64_t next_token_ = 1;
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_;
  absl::flat_hash_map<TimerId, absl::Time> timer_deadlines_;
  TimerId next_timer_ = 1;
  absl::Time now_ = absl::Now();
  bool stop_ = false;
  std::atomic<bool> stop_requested_{false};
  absl::Mutex posted_mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(posted_mu_);
};

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_EVENT_LOOP_H_
