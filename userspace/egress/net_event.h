// Network decisions as the kernel reports them, decoded from the ring
// buffer through the shared ABI header.
#ifndef SANDFENCE_EGRESS_NET_EVENT_H_
#define SANDFENCE_EGRESS_NET_EVENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/bpf_handles.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "egress/egress_abi.h"

namespace sandfence {

struct NetEvent {
  sf_hook hook = SF_HOOK_CONNECT4;
  sf_verdict verdict = SF_VERDICT_DENY;
  sf_reason reason = SF_REASON_NO_RULE;
  uint8_t protocol = 0;  // IPPROTO_*
  uint8_t sock_type = 0;
  uint16_t port = 0;
  uint32_t rule_id = SF_NO_RULE;
  uint32_t generation = 0;
  uint32_t pid = 0;
  uint32_t tgid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t boot_ns = 0;
  uint64_t sandbox = 0;
  uint64_t cgroup = 0;
  IpAddress addr;  // not for Unix sockets
  std::string comm;
  // AF_UNIX attempts (connect_unix, sendmsg_unix): the name, else nullopt.
  std::optional<UnixName> unix_name;
  // What that name led to, where sandfence's supervisor resolved it: the
  // name its server bound and its inode ("/path (inode N)"); else empty.
  std::string unix_reached;
  // Decided by sandfence's supervisor, not a kernel hook: no kernel
  // counter holds it (sandbox/socket_attempts.h).
  bool supervised = false;

  bool denied() const { return verdict == SF_VERDICT_DENY; }
  // Let through by an audit-only phase that would have denied it.
  bool would_deny() const { return verdict == SF_VERDICT_AUDIT_DENY; }
  bool is_unix() const { return unix_name.has_value(); }
};

// A connection a phase switch cut (EgressController::CutConnections).
struct CutConnection {
  uint64_t sandbox = 0;  // the sandbox whose phase denies the peer
  IpAddress peer;
  uint16_t port = 0;
  uint8_t protocol = 0;      // IPPROTO_TCP or IPPROTO_UDP
  uint8_t tcp_state = 0;     // TCP_ESTABLISHED, TCP_SYN_SENT, ...
  sf_reason reason = SF_REASON_NO_RULE;
  int destroy_errno = 0;     // 0: destroyed; else why the kernel refused
};

absl::StatusOr<NetEvent> DecodeNetEvent(const void* data, size_t size);

absl::string_view HookName(sf_hook hook);
absl::string_view VerdictName(sf_verdict verdict);
// Whether a recorded reason is an egress budget's (the rules allowed it):
// "budget: ..." (ReasonName of SF_REASON_BUDGET_*).
bool IsBudgetReason(absl::string_view recorded);
absl::string_view ReasonName(sf_reason reason);
// "tcp", "udp", "icmp", or the number.
std::string ProtocolName(uint8_t protocol);
// What the record's protocol says: "unix" for a Unix name, the family
// ("vsock") for the socket hook, "io_uring", else ProtocolName.
std::string AttemptProtocol(const NetEvent& e);
// Whether the event has an IP destination (address and port) at all.
bool HasDestination(const NetEvent& e);
// Whether userspace judged it (the socket-family supervisor), not a hook:
// no kernel counter includes it.
bool IsSupervised(const NetEvent& e);

// Reads a ring buffer and hands every decoded event to a callback. Not
// thread-safe: one thread polls.
class NetEventReader {
 public:
  using Callback = std::function<void(const NetEvent&)>;

  static absl::StatusOr<std::unique_ptr<NetEventReader>> Create(
      int ring_fd, Callback callback);

  // Waits up to timeout_ms for events and handles all that are ready.
  absl::StatusOr<int> Poll(int timeout_ms);
  // Handles everything already in the buffer without waiting.
  absl::StatusOr<int> Drain();

  // Records that could not be decoded (a newer or corrupt producer).
  uint64_t decode_errors() const { return decode_errors_; }

 private:
  NetEventReader() = default;
  static int OnSample(void* ctx, void* data, size_t size);

  Callback callback_;
  RingBuffer ring_;
  uint64_t decode_errors_ = 0;
};

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_NET_EVENT_H_
