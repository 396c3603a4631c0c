#include "dns/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/memory/memory.h"
#include "common/status.h"

namespace sandfence::dns {
namespace {
constexpr uint64_t kWakeToken = 0;
constexpr int kMaxEvents = 128;
}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create() {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) return ErrnoError(errno, "epoll_create1");
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return ErrnoError(errno, "eventfd");
  epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return ErrnoError(errno, "epoll_ctl add eventfd");
  }
  return absl::WrapUnique(new EventLoop(std::move(epoll), std::move(wake)));
}

absl::Status EventLoop::Add(int fd, uint32_t events, FdHandler handler) {
  const uint64_t token = next_token_++;
  epoll_event ev = {};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoError(errno, "epoll_ctl add");
  }
  watches_[fd] = Watch{token, std::move(handler)};
  tokens_[token] = fd;
  return absl::OkStatus();
}

absl::Status EventLoop::Modify(int fd, uint32_t events) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return absl::NotFoundError("fd is not watched");
  epoll_event ev = {};
  ev.events = events;
  ev.data.u64 = it->second.token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return ErrnoError(errno, "epoll_ctl mod");
  }
  return absl::OkStatus();
}

void EventLoop::Remove(int fd) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  tokens_.erase(it->second.token);
  watches_.erase(it);
}

void EventLoop::Forget(int fd) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return;
  tokens_.erase(it->second.token);
  watches_.erase(it);
}

EventLoop::TimerId EventLoop::AddTimer(absl::Time deadline,
                                       std::function<void()> fn) {
  const TimerId id = next_timer_++;
  timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  timer_deadlines_[id] = deadline;
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_deadlines_.erase(it);
}

absl::Status EventLoop::RunOnce(absl::Duration max_wait) {
  now_ = absl::Now();
  absl::Duration wait = max_wait;
  if (!timers_.empty()) {
    wait = std::min(wait, std::max(absl::ZeroDuration(),
                                   timers_.begin()->first.first - now_));
  }
  // Round up so that a timer 0.3 ms away does not spin.
  const int64_t wait_ms =
      absl::ToInt64Milliseconds(wait + absl::Microseconds(999));
  epoll_event events[kMaxEvents];
  const int n =
      ::epoll_wait(epoll_.get(), events, kMaxEvents,
                   static_cast<int>(std::min<int64_t>(wait_ms, 60000)));
  if (n < 0 && errno != EINTR) return ErrnoError(errno, "epoll_wait");
  now_ = absl::Now();
  for (int i = 0; i < n; ++i) {
    const uint64_t token = events[i].data.u64;
    if (token == kWakeToken) {
      uint64_t v;
      while (::read(wake_.get(), &v, sizeof(v)) > 0) {
      }
      std::vector<std::function<void()>> posted;
      {
        absl::MutexLock lock(&posted_mu_);
        posted.swap(posted_);
      }
      for (auto& fn : posted) fn();
      if (stop_requested_.exchange(false)) stop_ = true;
      continue;
    }
    auto t = tokens_.find(token);
    if (t == tokens_.end()) continue;  // removed by an earlier handler
    auto w = watches_.find(t->second);
    // A copy: the handler may remove itself.
    FdHandler handler = w->second.handler;
    handler(events[i].events);
  }
  while (!timers_.empty() && timers_.begin()->first.first <= now_) {
    auto it = timers_.begin();
    std::function<void()> fn = std::move(it->second);
    timer_deadlines_.erase(it->first.second);
    timers_.erase(it);
    fn();
  }
  return absl::OkStatus();
}

absl::Status EventLoop::Run() {
  // stop_ is set on this thread, when the round reads Stop()'s eventfd.
  stop_ = false;
  while (!stop_) {
    absl::Status s = RunOnce(absl::Seconds(1));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void EventLoop::Stop() {
  stop_requested_ = true;
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void EventLoop::Post(std::function<void()> fn) {
  {
    absl::MutexLock lock(&posted_mu_);
    posted_.push_back(std::move(fn));
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

}  // namespace sandfence::dns
