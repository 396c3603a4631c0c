// One event of the stream collectors read (docs/events.md): what a sandbox
// decided, in a shape that has no kernel or protobuf types in it, and its
// two renderings: sandfence's own JSON line and OCSF.
//
// Every line carries time, rollout, phase, kind and verdict; the kind says
// which of the other members mean something. Renderers leave out empty
// members, so a collector sees only what the event has.
#ifndef SANDFENCE_EVENTS_EVENT_H_
#define SANDFENCE_EVENTS_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"

namespace sandfence::events {

// The schema's name and version: every line says it, and a change that
// removes or retypes a field makes a new version.
inline constexpr char kSchema[] = "sandfence.events.v1";

enum class Kind { kNetwork, kDns, kUnix, kGuard, kPhase, kLoss, kRefusal };
absl::string_view KindName(Kind kind);

enum class Format { kJsonLines, kOcsf };
// "jsonl" (also "json") or "ocsf"; Malformed otherwise, naming the value.
absl::StatusOr<Format> ParseFormat(absl::string_view text);

struct Process {
  uint32_t pid = 0;  // thread group (the process); 0: unknown
  uint32_t uid = 0;
  std::string comm;
  bool known() const { return pid != 0 || !comm.empty(); }
};

struct Event {
  int64_t unix_ns = 0;
  std::string rollout;
  std::string phase;
  Kind kind = Kind::kNetwork;
  // network, unix, dns: "allowed", "denied", "would_deny" (an audit-only
  // phase let it through); guard: "denied", "killed", "audited"; phase:
  // "applied"; loss: "lost"; refusal: "refused".
  std::string verdict;
  std::string reason;  // why, for a person (the rule, the detail)
  Process process;     // who asked (network, unix, guard)

  // network, unix: the hook ("connect4", "sendmsg6", "connect_unix",
  // "socket") and the protocol ("tcp", "udp", "unix", "vsock", ...).
  std::string hook;
  std::string protocol;
  std::optional<IpAddress> address;  // network: the destination
  uint16_t port = 0;
  std::string path;  // unix: the name connected or sent to ("@x": abstract)

  // dns
  std::string name;
  std::string query_type;  // "A", "AAAA", "TYPE65"
  std::string rcode;       // what the client got: "NOERROR", "NXDOMAIN"
  std::vector<IpAddress> answers;  // learned (allowed only)
  std::string matched;             // the policy pattern(s) that matched

  // guard: what was tried ("ptrace_attach", "proc_open"), at whom, and the
  // layer that decided ("lsm", "signal", "landlock", "seccomp").
  std::string action;
  std::string layer;
  Process target;
  std::string detail;  // the /proc entry, the syscall

  // phase: the phase left ("" at the start) and the kernel generation;
  // ended: the sandbox is gone (phase is then the last one).
  std::string from_phase;
  uint32_t generation = 0;
  bool ended = false;

  // loss: what could not be delivered, by counter name.
  std::vector<std::pair<std::string, uint64_t>> counts;

  // refusal: the typed cause ("unenforceable", "malformed", ...), the field
  // and value it names (when known), and whether a retry can help.
  std::string cause;
  std::string field;
  std::string value;
  bool retryable = false;
};

// One line of sandfence's own schema, without the newline.
std::string RenderJson(const Event& event);
// The same event as an OCSF 1.3 object, without the newline: network and
// unix as Network Activity (4001), dns as DNS Activity (4003), guard as
// Process Activity (1007); phase, loss and refusal as the Base Event (0).
// sandfence's own fields that OCSF has no place for are under "unmapped".
std::string RenderOcsf(const Event& event);
std::string Render(const Event& event, Format format);

// A refusal (nothing started) as an event, now: its typed cause, whether a
// retry can help, and the message.
Event RefusalEvent(const std::string& rollout, const std::string& phase,
                   const absl::Status& status);

// RFC 3339 in UTC with nanoseconds: "2026-12-06T04:55:01.123456789Z".
std::string Rfc3339(int64_t unix_ns);

}  // namespace sandfence::events

#endif  // SANDFENCE_EVENTS_EVENT_H_
