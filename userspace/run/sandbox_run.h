// Runs one command in a fresh sandbox under one compiled phase: the library
// behind `sandfence run` and `sandfence demo`, a driver of the sandbox
// lifecycle (sandbox/sandbox.h).
//
// Order, so that nothing ever runs unenforced: the sandbox is started
// (cgroup, hooks, guard), then the command is cloned straight into its
// cgroup. On the way out the sandbox ends: whatever is left in it is
// killed before the hooks come off. Its links are pinned on the host's
// state: if this process is killed, the sandbox stays enforced until the
// next sandfence process ends it.
#ifndef SANDFENCE_RUN_SANDBOX_RUN_H_
#define SANDFENCE_RUN_SANDBOX_RUN_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "compile/compiled_policy.h"
#include "confine/confine.h"
#include "egress/egress_controller.h"
#include "egress/net_event.h"
#include "events/event_stream.h"
#include "guard/guard_types.h"
#include "host/host_state.h"
#include "records/recorder.h"

namespace sandfence {

struct RunRequest {
  CompiledPhase phase;
  std::vector<std::string> argv;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  bool private_netns = false;
  // Where sandbox cgroups are made; empty: <cgroup2 mount>/sandfence.
  std::string cgroup_parent;
  // Sees every event as it is read.
  std::function<void(const NetEvent&)> on_event;
  // When set, the rollout record is written there as events arrive; its
  // header holds every phase of `policy` (required then).
  std::string record_path;
  const CompiledPolicy* policy = nullptr;
  std::string rollout_id;  // default: "run-<pid>"
  // Where every decision also goes as a line (`--events-out`); null: none.
  std::shared_ptr<events::EventStream> events;
  // The process guard; unset: what the phase's guard block says (auto).
  std::optional<GuardMode> guard_mode;
  // The host's shared, pinned state (kDefaultPinRoot); "" = private: the
  // sandbox dies with this process instead of outliving it enforced.
  std::string pin_root = kDefaultPinRoot;
  // The phase may be audit only (enforce: AUDIT); without this such a run
  // is refused (Rejected) before anything starts.
  bool allow_audit = false;
};

// A process-guard decision, as the summary shows it.
struct GuardSummaryLine {
  std::string action;  // "denied", "killed", "audited"
  std::string what;    // "ptrace_attach", "proc_open", ...
  std::string detail;  // the /proc entry, the cgroup file
  uint32_t actor_pid = 0;
  std::string actor_comm;
  uint32_t target_pid = 0;
  std::string target_comm;
};

// A denied destination, folded.
struct DeniedDestination {
  std::string protocol;  // "tcp", "udp", or the socket kind for sock_create
  std::string destination;  // "127.0.0.4:9000", "[::1]:53", "raw socket"
  uint64_t count = 0;
  uint32_t first_pid = 0;
  std::string first_comm;
};

struct RunSummary {
  int exit_status = 0;  // the command's, 128+N for signal N
  // A signal arrived while the sandbox was set up: the command never ran
  // (exit_status is 128+N for that signal).
  bool interrupted_before_start = false;
  std::string cgroup_path;
  SandboxCounters counters;  // the kernel's own counts
  // Decided by run's supervisor (socket families, Unix paths): no kernel
  // counter holds them; the summary's counts add them.
  uint64_t supervised_allowed = 0;
  uint64_t supervised_denied = 0;
  uint64_t events_read = 0;
  uint64_t decode_errors = 0;
  std::vector<DeniedDestination> denied;  // most frequent first
  // What an audit-only phase let through and would have denied.
  std::vector<DeniedDestination> would_deny;  // most frequent first
  std::vector<std::string> allowed;       // destinations seen allowed
  std::optional<RecordOutcome> record;    // with RunRequest::record_path
  // "lsm", "landlock", "signal", "off"; "lsm+landlock" where both hold
  // (GuardLabel).
  std::string guard_enforcer;
  std::string guard_fallback;  // why auto did not pick lsm
  // With Landlock + seccomp: each guarantee and the layer that holds it.
  std::vector<ConfineGuarantee> guard_layers;
  std::vector<GuardSummaryLine> guard_events;
  uint64_t guard_events_lost = 0;
  // Sandboxes of dead `sandfence run`s this run ended before it started.
  std::vector<uint64_t> reaped;
  std::vector<std::string> reap_errors;
};

// Root only (CAP_BPF, CAP_NET_ADMIN, cgroup writes). SIGINT, SIGTERM and
// SIGHUP are forwarded to the command; a second one kills the sandbox.
absl::StatusOr<RunSummary> RunInSandbox(const RunRequest& request);

// What `sandfence run` prints to stderr before the command starts: "" for
// an enforced phase; for an audit-only one, that nothing will be denied.
std::string FormatRunBanner(const CompiledPhase& phase);

// The few lines `sandfence run` prints to stderr when the command ends. An
// audit-only phase's first line says AUDIT ONLY (nothing denied).
std::string FormatRunSummary(const RunSummary& summary,
                             const CompiledPhase& phase);
// The same as one line of JSON (`run --json`), snake_case as every --json.
std::string FormatRunSummaryJson(const RunSummary& summary,
                                 const CompiledPhase& phase);

}  // namespace sandfence

#endif  // SANDFENCE_RUN_SANDBOX_RUN_H_
