#include "sandbox/event_hub.h"

#include <cerrno>
#include <cstring>

#include "common/status.h"

namespace sandfence {
namespace {

HubCounts Since(const HubCounts& now, const HubCounts& then) {
  return {now.net_decode_errors - then.net_decode_errors,
          now.net_unrouted - then.net_unrouted,
          now.guard_decode_errors - then.guard_decode_errors,
          now.guard_unrouted - then.guard_unrouted};
}

}  // namespace

void EventHub::Route(uint64_t cgroup_id, EventRoute* route) {
  absl::MutexLock lock(&mu_);
  routes_[cgroup_id] = Entry{route, counts_};
}

HubCounts EventHub::Unroute(uint64_t cgroup_id) {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find(cgroup_id);
  if (it == routes_.end()) return {};
  HubCounts out = Since(counts_, it->second.at_open);
  routes_.erase(it);
  return out;
}

void EventHub::DispatchNet(const NetEvent& event) {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find(event.sandbox);
  if (it == routes_.end()) {
    ++counts_.net_unrouted;
    return;
  }
  it->second.route->OnNetEvent(event);
}

void EventHub::DispatchGuard(const sf_guard_event& event) {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find(event.sandbox_id);
  if (it == routes_.end()) {
    ++counts_.guard_unrouted;
    return;
  }
  it->second.route->OnGuardEvent(event);
}

void EventHub::CountNetDecodeError() {
  absl::MutexLock lock(&mu_);
  ++counts_.net_decode_errors;
}

void EventHub::CountGuardDecodeError() {
  absl::MutexLock lock(&mu_);
  ++counts_.guard_decode_errors;
}

HubCounts EventHub::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

absl::StatusOr<std::unique_ptr<KernelEventSource>> KernelEventSource::Create(
    EventHub* hub, int net_ring_fd, int guard_ring_fd) {
  std::unique_ptr<KernelEventSource> s(new KernelEventSource());
  s->hub_ = hub;
  if (net_ring_fd >= 0) {
    s->rings_.reset(ring_buffer__new(net_ring_fd, &KernelEventSource::OnNet,
                                     hub, nullptr));
    if (!s->rings_) return ErrnoError(errno, "read the egress event ring");
  }
  if (guard_ring_fd >= 0) {
    if (!s->rings_) {
      s->rings_.reset(ring_buffer__new(
          guard_ring_fd, &KernelEventSource::OnGuard, hub, nullptr));
      if (!s->rings_) return ErrnoError(errno, "read the guard event ring");
    } else if (ring_buffer__add(s->rings_.get(), guard_ring_fd,
                                &KernelEventSource::OnGuard, hub) != 0) {
      return ErrnoError(errno, "read the guard event ring");
    }
  }
  return s;
}

int KernelEventSource::OnNet(void* ctx, void* data, size_t size) {
  EventHub* hub = static_cast<EventHub*>(ctx);
  absl::StatusOr<NetEvent> e = DecodeNetEvent(data, size);
  if (!e.ok()) {
    hub->CountNetDecodeError();
    return 0;
  }
  hub->DispatchNet(*e);
  return 0;
}

int KernelEventSource::OnGuard(void* ctx, void* data, size_t size) {
  EventHub* hub = static_cast<EventHub*>(ctx);
  if (size < sizeof(sf_guard_event)) {
    hub->CountGuardDecodeError();
    return 0;
  }
  sf_guard_event e;
  std::memcpy(&e, data, sizeof(e));
  hub->DispatchGuard(e);
  return 0;
}

absl::StatusOr<int> KernelEventSource::Poll(int timeout_ms) {
  if (!rings_) return 0;
  const int n = ring_buffer__poll(rings_.get(), timeout_ms);
  if (n < 0) {
    if (n == -EINTR) return 0;
    return ErrnoError(-n, "poll the event rings");
  }
  return n;
}

absl::StatusOr<int> KernelEventSource::Drain() {
  if (!rings_) return 0;
  const int n = ring_buffer__consume(rings_.get());
  if (n < 0) return ErrnoError(-n, "drain the event rings");
  return n;
}

int KernelEventSource::fd() const {
  return rings_ ? ring_buffer__epoll_fd(rings_.get()) : -1;
}

}  // namespace sandfence
