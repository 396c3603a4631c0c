#include "egress/net_event.h"

#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "confine/socket_supervisor.h"

namespace sandfence {

absl::StatusOr<NetEvent> DecodeNetEvent(const void* data, size_t size) {
  if (size < sizeof(sf_net_event)) {
    return absl::DataLossError(absl::StrCat(
        "event of ", size, " bytes, expected ", sizeof(sf_net_event)));
  }
  sf_net_event raw;
  std::memcpy(&raw, data, sizeof(raw));
  NetEvent e;
  if (raw.type == SF_EVENT_UNIX) {
    if (size < sizeof(sf_unix_event)) {
      return absl::DataLossError(absl::StrCat("unix event of ", size,
                                              " bytes, expected ",
                                              sizeof(sf_unix_event)));
    }
    sf_unix_event u;
    std::memcpy(&u, data, sizeof(u));
    UnixName name;
    name.abstract = u.abstract != 0;
    name.name.assign(u.name, name.abstract
                                 ? std::min<size_t>(u.len, sizeof(u.name))
                                 : strnlen(u.name, sizeof(u.name)));
    e.unix_name = std::move(name);
  } else if (raw.type != SF_EVENT_NET) {
    return absl::DataLossError(absl::StrCat("unknown event type ", raw.type));
  }
  if (raw.verdict != SF_VERDICT_ALLOW && raw.verdict != SF_VERDICT_DENY &&
      raw.verdict != SF_VERDICT_AUDIT_DENY) {
    return absl::DataLossError(absl::StrCat("unknown verdict ", raw.verdict));
  }
  e.hook = static_cast<sf_hook>(raw.hook);
  e.verdict = static_cast<sf_verdict>(raw.verdict);
  e.reason = static_cast<sf_reason>(raw.reason);
  e.protocol = raw.protocol;
  e.sock_type = raw.sock_type;
  e.port = raw.port;
  e.rule_id = raw.rule_id;
  e.generation = raw.generation;
  e.pid = raw.pid;
  e.tgid = raw.tgid;
  e.uid = raw.uid;
  e.gid = raw.gid;
  e.boot_ns = raw.boot_ns;
  e.sandbox = raw.sandbox;
  e.cgroup = raw.cgroup;
  e.addr = IpAddress::FromBytes(raw.family == AF_INET6 ? AF_INET6 : AF_INET,
                                raw.addr);
  e.comm.assign(raw.comm, strnlen(raw.comm, sizeof(raw.comm)));
  return e;
}

absl::string_view HookName(sf_hook hook) {
  switch (hook) {
    case SF_HOOK_CONNECT4:
      return "connect4";
    case SF_HOOK_CONNECT6:
      return "connect6";
    case SF_HOOK_SENDMSG4:
      return "sendmsg4";
    case SF_HOOK_SENDMSG6:
      return "sendmsg6";
    case SF_HOOK_SOCK_CREATE:
      return "sock_create";
    case SF_HOOK_SKB_EGRESS:
      return "skb_egress";
    case SF_HOOK_CONNECT_UNIX:
      return "connect_unix";
    case SF_HOOK_SENDMSG_UNIX:
      return "sendmsg_unix";
    case SF_HOOK_UNIX_STREAM_CONNECT:
      return "unix_stream_connect";
    case SF_HOOK_UNIX_MAY_SEND:
      return "unix_may_send";
    case SF_HOOK_SOCKET:
      return "socket";
    case SF_HOOK_IO_URING_SETUP:
      return "io_uring_setup";
  }
  return "unknown";
}

absl::string_view VerdictName(sf_verdict verdict) {
  switch (verdict) {
    case SF_VERDICT_ALLOW:
      return "allow";
    case SF_VERDICT_DENY:
      return "deny";
    case SF_VERDICT_AUDIT_DENY:
      return "would deny";
  }
  return "unknown";
}

absl::string_view ReasonName(sf_reason reason) {
  switch (reason) {
    case SF_REASON_RULE:
      return "rule";
    case SF_REASON_NO_RULE:
      return "no rule";
    case SF_REASON_UNRESTRICTED:
      return "unrestricted";
    case SF_REASON_OWN_LOOPBACK:
      return "own loopback";
    case SF_REASON_NO_SANDBOX:
      return "no sandbox";
    case SF_REASON_SOCKET_TYPE:
      return "raw socket";
    case SF_REASON_PROTOCOL:
      return "protocol";
    case SF_REASON_TOO_DEEP:
      return "too deep";
    case SF_REASON_DNS_REDIRECT:
      return "redirected to the DNS filter";
    case SF_REASON_LEARNED:
      return "learned";
    case SF_REASON_DNS_FILTER_RANGE:
      return "DNS filter range";
    case SF_REASON_DNS_NO_TARGET:
      return "no DNS filter";
    case SF_REASON_DNS_UNREDIRECTABLE:
      return "DNS not redirectable";
    case SF_REASON_UNIX_LISTED:
      return "unix name listed";
    case SF_REASON_UNIX_OWN:
      return "unix socket of the sandbox";
    case SF_REASON_UNIX_PROTECTED:
      return "sandfence's own socket";
    case SF_REASON_UNIX_UNCHECKED:
      return "unix unchecked";
    case SF_REASON_UNIX_PEER_OUTSIDE:
      return "unix peer outside the sandbox (killed)";
    case SF_REASON_UNIX_UNVERIFIABLE:
      return "unix own path, not verifiable";
    case SF_REASON_FAMILY:
      return "socket family not judged";
    case SF_REASON_IO_URING:
      return "io_uring (sockets no hook sees)";
    case SF_REASON_BUDGET_CONNECTIONS:
      return "budget: connections";
    case SF_REASON_BUDGET_BYTES:
      return "budget: bytes";
    case SF_REASON_BUDGET_DEST_BYTES:
      return "budget: bytes to this address";
    case SF_REASON_BUDGET_DESTS:
      return "budget: addresses counted";
    case SF_REASON_UNIX_OWN_SOCKET:
      return "unix socket of the sandbox (checked by the supervisor)";
    case SF_REASON_UNIX_SCOPED:
      return "unix abstract name, scoped by Landlock";
    case SF_REASON_UNIX_OUTSIDE_SOCKET:
      return "unix socket outside the sandbox (checked by the supervisor)";
  }
  return "unknown";
}

bool IsBudgetReason(absl::string_view recorded) {
  for (sf_reason r : {SF_REASON_BUDGET_CONNECTIONS, SF_REASON_BUDGET_BYTES,
                      SF_REASON_BUDGET_DEST_BYTES, SF_REASON_BUDGET_DESTS}) {
    if (recorded == ReasonName(r)) return true;
  }
  return false;
}

std::string ProtocolName(uint8_t protocol) {
  switch (protocol) {
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_ICMP:
      return "icmp";
    case IPPROTO_ICMPV6:
      return "icmpv6";
    case IPPROTO_RAW:
      return "raw";
  }
  return absl::StrCat("proto ", protocol);
}

std::string AttemptProtocol(const NetEvent& e) {
  if (e.is_unix()) return "unix";
  if (e.hook == SF_HOOK_IO_URING_SETUP) return "io_uring";
  if (e.hook == SF_HOOK_SOCKET) {
    return e.protocol == 0 ? "unknown (32-bit socketcall)"
                           : confine::SocketFamilyName(e.protocol);
  }
  return ProtocolName(e.protocol);
}

bool HasDestination(const NetEvent& e) {
  return !e.is_unix() && e.hook != SF_HOOK_SOCK_CREATE && !IsSupervised(e);
}

bool IsSupervised(const NetEvent& e) {
  return e.supervised || e.hook == SF_HOOK_SOCKET ||
         e.hook == SF_HOOK_IO_URING_SETUP ||
         e.reason == SF_REASON_UNIX_OWN_SOCKET ||
         e.reason == SF_REASON_UNIX_OUTSIDE_SOCKET;
}

absl::StatusOr<std::unique_ptr<NetEventReader>> NetEventReader::Create(
    int ring_fd, Callback callback) {
  std::unique_ptr<NetEventReader> r(new NetEventReader());
  r->callback_ = std::move(callback);
  r->ring_.reset(
      ring_buffer__new(ring_fd, &NetEventReader::OnSample, r.get(), nullptr));
  if (!r->ring_) return ErrnoError(errno, "open the event ring buffer");
  return r;
}

int NetEventReader::OnSample(void* ctx, void* data, size_t size) {
  auto* self = static_cast<NetEventReader*>(ctx);
  absl::StatusOr<NetEvent> e = DecodeNetEvent(data, size);
  if (!e.ok()) {
    ++self->decode_errors_;
    return 0;
  }
  self->callback_(*e);
  return 0;
}

absl::StatusOr<int> NetEventReader::Poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_.get(), timeout_ms);
  if (n < 0 && n != -EINTR) return ErrnoError(-n, "poll the event ring buffer");
  return n < 0 ? 0 : n;
}

absl::StatusOr<int> NetEventReader::Drain() {
  int n = ring_buffer__consume(ring_.get());
  if (n < 0) return ErrnoError(-n, "drain the event ring buffer");
  return n;
}

}  // namespace sandfence
