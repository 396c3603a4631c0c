// One event path for a sandfence process: the kernel's network decisions
// and process-guard decisions, read from this process's two rings with one
// poll, handed to the route of the sandbox that judged them. A route is the
// sandbox's lifecycle object (its record, its listeners). What cannot be
// routed or decoded is counted, never dropped silently, and each route
// learns how much of that happened while it was open.
#ifndef SANDFENCE_SANDBOX_EVENT_HUB_H_
#define SANDFENCE_SANDBOX_EVENT_HUB_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/bpf_handles.h"
#include "egress/net_event.h"
#include "guard/guard_abi.h"

namespace sandfence {

// Where one sandbox's events go. Called on the thread that polls; must not
// block.
class EventRoute {
 public:
  virtual ~EventRoute() = default;
  virtual void OnNetEvent(const NetEvent& event) = 0;
  virtual void OnGuardEvent(const sf_guard_event& event) = 0;
};

// Process-wide counts of what no route received.
struct HubCounts {
  uint64_t net_decode_errors = 0;
  uint64_t net_unrouted = 0;
  uint64_t guard_decode_errors = 0;
  uint64_t guard_unrouted = 0;
};

// Thread-safe: routes come and go on any thread while another dispatches.
class EventHub {
 public:
  EventHub() = default;
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // Events of sandbox `cgroup_id` go to route from now on. One route per
  // sandbox; the route must outlive its registration.
  void Route(uint64_t cgroup_id, EventRoute* route);
  // Stops routing; returns what the hub counted while the route was open
  // (the sandbox's share is unknowable, so all of it: an upper bound).
  HubCounts Unroute(uint64_t cgroup_id);

  void DispatchNet(const NetEvent& event);
  void DispatchGuard(const sf_guard_event& event);
  void CountNetDecodeError();
  void CountGuardDecodeError();

  HubCounts counts() const;

 private:
  struct Entry {
    EventRoute* route;
    HubCounts at_open;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> routes_ ABSL_GUARDED_BY(mu_);
  HubCounts counts_ ABSL_GUARDED_BY(mu_);
};

// Reads this process's egress and guard rings (either may be absent: -1)
// with one epoll and dispatches into a hub. Not thread-safe: one thread
// polls (Drain may be called by another under the caller's lock).
class KernelEventSource {
 public:
  static absl::StatusOr<std::unique_ptr<KernelEventSource>> Create(
      EventHub* hub, int net_ring_fd, int guard_ring_fd);

  // Waits up to timeout_ms and handles every event that is ready.
  absl::StatusOr<int> Poll(int timeout_ms);
  // Handles everything already in the rings without waiting.
  absl::StatusOr<int> Drain();
  // The epoll fd (readable when an event is ready), for a caller's poll.
  int fd() const;

 private:
  KernelEventSource() = default;
  static int OnNet(void* ctx, void* data, size_t size);
  static int OnGuard(void* ctx, void* data, size_t size);

  EventHub* hub_ = nullptr;
  RingBuffer rings_;
};

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_EVENT_HUB_H_
