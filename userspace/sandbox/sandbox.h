// One sandbox's life, written once for every driver (`sandfence run`, the
// daemon, and what comes next): its cgroup, its record, its egress policy,
// its process guard, its events.
//
//   Start        refusals first (an unknown phase, a guard mode the host
//                cannot have), then: the cgroup, the record's header and
//                first span, the events' route, the egress hooks, the
//                guard. Anything that fails undoes what came before.
//                A phase that filters DNS gets the sandbox a DNS filter
//                target before anything runs in it.
//   SwitchPhase  the record's next span, then the kernel's atomic switch,
//                then the DNS filter's names.
//   End          kill a created sandbox's processes, read what the kernel
//                queued, remove the guard and the hooks, remove the cgroup,
//                finalize the record with every loss the process saw.
//   Release      leave everything enforced for a successor (pinned host).
//   Adopt        take over a sandbox a dead process left: the kernel's
//                entry (generation and phase) is the truth; a sandbox whose
//                hooks were removed is killed (created) and attached again.
//
// Thread-safe: events arrive on the polling thread while another calls
// SwitchPhase or End.
#ifndef SANDFENCE_SANDBOX_SANDBOX_H_
#define SANDFENCE_SANDBOX_SANDBOX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "compile/compiled_policy.h"
#include "confine/confine.h"
#include "egress/net_event.h"
#include "events/event_stream.h"
#include "guard/guard_abi.h"
#include "guard/guard_types.h"
#include "common/unique_fd.h"
#include "records/recorder.h"
#include "sandbox/host_enforcement.h"
#include "sandbox/sandbox_events.h"

namespace sandfence {

struct SandboxSpec {
  std::string rollout_id;
  std::string cgroup_path;
  // true: the cgroup is created here, and End kills what runs in it and
  // removes it. false: an existing cgroup, never killed or removed.
  bool create_cgroup = true;
  // The cgroup's enforcement belongs to another open rollout: attach
  // nothing, keep only a record (the daemon's borrowing).
  bool borrowed = false;
  std::string borrowed_guard_text;  // what the record says of the guard
  CompiledPolicy policy;
  // The sandbox has a network namespace of its own (the policy was
  // compiled for one). A DNS-filtered phase's filter then listens there:
  // netns_fd names it (kept open by the caller during Start). Without it,
  // such a sandbox cannot be served and Start refuses.
  bool own_netns = false;
  int netns_fd = -1;
  std::string initial_phase;  // "" = the policy's first
  // The process guard; unset: the initial phase's guard block.
  std::optional<GuardMode> guard_mode;
  // The driver starts the sandbox's processes itself (`run`): they get
  // Landlock + seccomp where the host has them (guard().confined; the
  // driver applies ConfinementPlan() to each), and auto prefers that to
  // the signal enforcer.
  bool spawns = false;
  // The record's journal; "" = no record.
  std::string record_path;
  RecorderOptions record_options;
  // The event stream its decisions also go to (shared by every sandbox of
  // a process); null: none.
  std::shared_ptr<events::EventStream> events;
};

// A sandbox a dead process left, as its successor knows it.
struct SandboxAdoptSpec {
  std::string rollout_id;
  std::string cgroup_path;
  uint64_t cgroup_id = 0;
  bool created = false;
  bool borrowed = false;
  std::string borrowed_guard_text;
  CompiledPolicy policy;
  GuardMode guard_mode = GuardMode::kAuto;
  // The phase the successor believed in (its state); the kernel's wins.
  std::string believed_phase;
  // A new journal for the rest of the record; "" = no record.
  std::string record_path;
  RecorderOptions record_options;
  std::shared_ptr<events::EventStream> events;
};

struct PhaseChange {
  std::string previous;
  std::string phase;
  uint32_t generation = 0;
  bool changed = false;  // false: already in that phase (a retry)
  // The connections the switch cut (what the sandbox opened before and the
  // new phase forbids), or why none could be: not_cut is "" when the cut
  // ran. The switch itself holds either way.
  std::vector<CutConnection> cut;
  std::string not_cut;
};

// What End knows when the sandbox is gone.
struct SandboxEnd {
  SandboxCounters counters;  // the kernel's own counts (zero if borrowed)
  bool counters_read = false;
  uint64_t guard_events_lost = 0;
  HubCounts hub;  // undecodable/unroutable events while it was open
  std::optional<RecordOutcome> record;
  // Processes that could not be killed, a cgroup that could not be removed:
  // the record was finalized all the same.
  absl::Status cleanup;
};

// A listener sees every event of the sandbox after its record does. It runs
// on the polling thread and must not block.
struct SandboxListener {
  std::function<void(const NetEvent&)> on_net;
  std::function<void(const sf_guard_event&)> on_guard;
};

// What Start would do, decided before anything exists (Sandbox::Check).
struct SandboxCheck {
  int phase_index = 0;  // the initial phase
  std::optional<std::vector<HostPort>> dns_upstreams;  // DNS-filtered phases'
  GuardMode guard_mode = GuardMode::kOff;
  GuardInfo guard;
  std::string guard_text;  // what the record says of the guard
};

class Sandbox : private EventRoute {
 public:
  // Every refusal Start would make, and nothing else: no cgroup, record,
  // hook or route is made (the host's guard may be loaded, as the first
  // Start would). The daemon's dry run (CheckRollout) is this.
  static absl::StatusOr<SandboxCheck> Check(HostEnforcement* host,
                                            const SandboxSpec& spec);
  static absl::StatusOr<std::unique_ptr<Sandbox>> Start(
      HostEnforcement* host, SandboxSpec spec);
  static absl::StatusOr<std::unique_ptr<Sandbox>> Adopt(
      HostEnforcement* host, SandboxAdoptSpec spec);
  // Releases (never ends) a sandbox that was neither ended nor released.
  ~Sandbox() override;

  // Why the sandbox's cgroup is gone (removed, or another cgroup at its
  // path), or "" while it is there. Nothing can run in a removed cgroup.
  std::string CgroupGoneReason() const;
  // Marks the cgroup gone before End: End then neither kills nor removes
  // anything by its path (which may name another cgroup now), and the
  // record carries `why` as WARNING_SANDBOX_GONE.
  void NoteGone(std::string why);

  // Malformed for a phase the policy does not have.
  absl::StatusOr<PhaseChange> SwitchPhase(absl::string_view phase);
  absl::StatusOr<SandboxEnd> End();
  void Release();

  const std::string& rollout_id() const { return rollout_id_; }
  const CgroupRef& cgroup() const { return cgroup_; }
  const CompiledPolicy& policy() const { return policy_; }
  bool created() const { return created_; }
  bool borrowed() const { return borrowed_; }
  std::string phase() const;
  const CompiledPhase& current_phase() const;
  uint32_t generation() const;
  // An attempt judged outside the kernel's hooks (the socket-family
  // supervisor: sandbox/socket_attempts.h), into the record and to the
  // listeners as a hook's event would go.
  void AddSupervisedEvent(const NetEvent& event) { OnNetEvent(event); }
  // What the record says of the process guard.
  const std::string& guard_text() const { return guard_text_; }
  const GuardInfo& guard() const { return guard_; }
  GuardMode guard_mode() const { return guard_mode_; }
  // What the processes a driver starts from now on must apply to
  // themselves (guard().confined): the strictest of the phases from the
  // current one to the last, since Landlock and seccomp stay for the
  // process's life; sandfence's own files (own_paths) out of reach.
  ConfinePlan ConfinementPlan(const std::vector<std::string>& own_paths) const;
  // What the confinement a driver prepared holds and does not: the guard's
  // text (and the record's) names the layers and every gap.
  void NoteConfinement(const std::vector<ConfineGuarantee>& guarantees);
  // What adoption found wrong (hooks removed, a phase switch cut short).
  const std::vector<std::string>& adoption_warnings() const {
    return adoption_warnings_;
  }
  RolloutRecorder* recorder() const { return recorder_.get(); }
  absl::StatusOr<SandboxCounters> Counters() const;

  uint64_t AddListener(SandboxListener listener);
  void RemoveListener(uint64_t id);

 private:
  Sandbox(HostEnforcement* host, std::string rollout_id)
      : host_(host), rollout_id_(std::move(rollout_id)) {}
  void OnNetEvent(const NetEvent& event) override;
  void OnGuardEvent(const sf_guard_event& event) override;
  // The DNS filter (issue 14): a target of its own, then the current
  // phase's names.
  // netns_fd: the sandbox's own network namespace, or -1.
  absl::Status ServeDns(int netns_fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetDnsPhaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The switch's cut into *out; Unavailable (and cut_pending_) when a
  // CUT_REQUIRED policy's cut failed.
  absl::Status CutLocked(PhaseChange* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OpenRecord(const std::string& path,
                          const RecorderOptions& options, bool overwrite);
  int PhaseIndex(absl::string_view name) const;

  HostEnforcement* const host_;
  const std::string rollout_id_;
  CompiledPolicy policy_;
  CgroupRef cgroup_;
  bool created_ = false;
  bool borrowed_ = false;
  GuardMode guard_mode_ = GuardMode::kOff;
  GuardInfo guard_;
  std::string guard_text_;
  std::vector<std::string> adoption_warnings_;
  std::shared_ptr<RolloutRecorder> recorder_;
  // Never null (a no-op without a stream): the DNS filter's callback holds
  // it, as it holds the recorder.
  std::shared_ptr<SandboxEvents> events_;
  int64_t mono_to_unix_ns_ = 0;

  mutable absl::Mutex mu_;
  int phase_index_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool guarded_ ABSL_GUARDED_BY(mu_) = false;
  bool routed_ ABSL_GUARDED_BY(mu_) = false;
  // Set when a phase filters DNS: where the filter asks.
  std::optional<std::vector<HostPort>> dns_upstreams_;
  bool dns_served_ ABSL_GUARDED_BY(mu_) = false;
  // Its own network namespace (a switch's cut walks the sockets there), or
  // none; own_netns_unknown_: it has one, but which is not known.
  UniqueFd netns_;
  bool own_netns_unknown_ = false;
  bool cut_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex listeners_mu_;
  std::vector<std::pair<uint64_t, SandboxListener>> listeners_
      ABSL_GUARDED_BY(listeners_mu_);
  uint64_t next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 1;
};

// What a process started in a sandbox under `policy` from phase `from_phase`
// on must apply to itself: the strictest of those phases (Landlock and
// seccomp stay for the process's life), with own_paths out of its reach.
ConfinePlan ConfinePlanForPhases(const CompiledPolicy& policy,
                                 size_t from_phase,
                                 const std::vector<std::string>& own_paths);

// What a record says of the process guard: the enforcer's name first, then
// why a phase does not get the mode it asks for (a rollout's mode is fixed
// when it starts).
std::string GuardEnforcementText(const GuardInfo& guard, GuardMode mode,
                                 const CompiledPolicy& policy);

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_SANDBOX_H_
