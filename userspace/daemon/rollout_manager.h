// The daemon's core, without gRPC: every open rollout on the host, each a
// Sandbox (sandbox/sandbox.h) with an id, a request and saved state.
//
//   Start     idempotent by request; the policy compiled (refusals come
//             back before anything is created or attached), the sandbox
//             started, the state saved for a successor.
//   SetPhase  the sandbox's atomic switch, then the saved state.
//   End       the sandbox ended, the journals merged into the final record.
//   Adopt     (at start-up) every rollout an earlier daemon left: the
//             kernel kept enforcing; its entry says which phase is in force.
//
// What this file decides, the kernel does not: rollout ids, idempotent
// retries, borrowing (a second rollout on an open rollout's cgroup, inherit
// only), which cgroups may be sandboxes. It runs the same over the real
// kernel (the daemon) and over a fake (unit tests without root).
//
// Thread-safe: calls for different rollouts run in parallel; calls for one
// rollout are serialized; List and Health never wait for a rollout's call.
#ifndef SANDFENCE_DAEMON_ROLLOUT_MANAGER_H_
#define SANDFENCE_DAEMON_ROLLOUT_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/ip.h"
#include "daemon/entry_supervisor.h"
#include "daemon/rollout_totals.h"
#include "daemon/state_store.h"
#include "events/event_stream.h"
#include "host/host_state.h"
#include "records/boot_clock.h"
#include "records/recorder.h"
#include "sandbox/host_enforcement.h"
#include "sandbox/sandbox.h"
#include "sandfence/v1/daemon.pb.h"

namespace sandfence {

struct ManagerOptions {
  // The host's pinned state (shared with every `sandfence run`).
  std::string pin_dir = kDefaultPinRoot;
  // One state file per open rollout, for the next daemon to adopt.
  std::string state_dir = kDefaultStateDir;
  std::string records_dir = std::string(kDefaultRecordsDir) + "/records";
  // Where StartRollout's policy_file names are looked up ("" = refused).
  std::string policy_dir;
  // Where created sandboxes go; empty: <cgroup2 mount>/sandfence.
  std::string cgroup_parent;
  // DNS servers for names in policies; empty: /etc/resolv.conf's.
  std::vector<HostPort> resolvers;
  uint32_t ring_bytes = 4u << 20;
  // Upper bounds on a StartRollout request.
  size_t max_request_bytes = 1 << 20;
  size_t max_open_rollouts = 4096;
  // How often the daemon ends the sandboxes of dead `sandfence run`s.
  int reap_interval_ms = 5000;
  // How often the daemon looks for open rollouts whose cgroup is gone
  // (removed without EndRollout) and ends them; 0: never.
  int gone_check_ms = 1000;
  // Every rollout's decisions, its refusals included, as event lines
  // (`--events-out`, and the watchers of `watch --json`); null: none.
  std::shared_ptr<events::EventStream> events;
};

// What the Prometheus endpoint shows.
struct ManagerMetrics {
  uint64_t rollouts_open = 0;
  uint64_t rollouts_started = 0;
  uint64_t rollouts_ended = 0;
  uint64_t rollouts_adopted = 0;
  uint64_t decisions_allowed = 0;  // events read, by verdict
  uint64_t decisions_denied = 0;
  // Kernel-side losses of every rollout this daemon has served, ended ones
  // included: a counter, which never goes down when a rollout ends.
  uint64_t events_lost = 0;
  uint64_t decode_errors = 0;
  uint64_t phase_switches = 0;
  uint64_t refusals = 0;
  uint64_t watch_events_missed = 0;  // by slow WatchEvents readers
  uint64_t calls_refused_from_sandboxes = 0;
  uint64_t runs_reaped = 0;
  uint64_t sandboxes_gone = 0;
  // Open rollouts whose phase in force is audit only (nothing denied).
  uint64_t audit_only_sandboxes = 0;
  // The DNS filters' counts of every rollout this daemon has served, ended
  // ones included (never going down), and the addresses the open rollouts'
  // filters learned: the series without a rollout label (issue 38).
  DnsQueryStats dns_total;
  uint64_t dns_learned_total = 0;
  // Per open rollout whose policy filters DNS (issue 14), by rollout id.
  struct RolloutDns {
    std::string rollout_id;
    DnsQueryStats queries;
    std::optional<uint64_t> learned;  // addresses held now; unset: unknown
  };
  std::vector<RolloutDns> dns;
};

// Rollout ids: 1..128 of [A-Za-z0-9_.-], not starting with '.'.
absl::Status ValidateRolloutId(absl::string_view id);

class RolloutManager {
 public:
  // Over the real kernel: joins the host's pinned state. Needs root.
  // Unavailable when another daemon uses the same state_dir.
  static absl::StatusOr<std::unique_ptr<RolloutManager>> Create(
      ManagerOptions options);
  // Over any enforcement (tests). The manager owns it.
  static absl::StatusOr<std::unique_ptr<RolloutManager>> CreateWith(
      ManagerOptions options, std::unique_ptr<HostEnforcement> enforcement);
  // The kernel enforcement Create uses for these options (a test wraps it
  // and passes it to CreateWith). Needs root.
  static absl::StatusOr<std::unique_ptr<HostEnforcement>> KernelEnforcementFor(
      const ManagerOptions& options);
  // Keeps a file of the daemon's (its socket) out of every guarded
  // sandbox's reach (HostEnforcement::Protect); the state, records and
  // policy directories are protected at creation.
  absl::Status Protect(const std::string& path);

  // Stops the event thread. Open rollouts stay enforced (pinned) for the
  // next daemon; nothing is detached.
  ~RolloutManager();

  // Ends the sandboxes of dead `sandfence run`s, takes over every rollout
  // in state_dir (and the sandboxes of dead daemons that no state names,
  // so that they stay enforced), then starts the event thread. Returns the
  // ids adopted. Call once, before serving.
  std::vector<std::string> AdoptAndStart();

  // A refusal is also an event line (ManagerOptions::events).
  absl::StatusOr<v1::StartRolloutResponse> Start(
      const v1::StartRolloutRequest& request);
  // A dry run of Start: the same refusals, or what Start would compile;
  // nothing is created, reserved, recorded or counted.
  absl::StatusOr<v1::CheckRolloutResponse> Check(
      const v1::StartRolloutRequest& request);
  absl::StatusOr<v1::SetPhaseResponse> SetPhase(const std::string& rollout_id,
                                                const std::string& phase);
  absl::StatusOr<v1::EndRolloutResponse> End(const std::string& rollout_id);
  absl::StatusOr<v1::GetRecordResponse> GetRecord(
      const std::string& rollout_id);
  v1::ListRolloutsResponse List();
  v1::HealthResponse Health();
  // `sandfence enter --rollout`: the rollout's cgroup and what the
  // confinement of a process entering it allows; the entry (who asked)
  // goes into the record.
  absl::StatusOr<v1::EnterRolloutResponse> Enter(const std::string& rollout_id,
                                                 pid_t caller);
  ManagerMetrics Metrics();
  // Takes the socket-family listeners of processes entering rollouts on
  // `path` (daemon/entry_supervisor.h) and answers their calls by each
  // rollout's phase. Once, after AdoptAndStart, before serving.
  absl::Status ServeSupervision(const std::string& path);

  // Calls `sink` (on the event thread) with every network decision of the
  // rollout until Unwatch; the sink must not block.
  using EventSink = std::function<void(const v1::RolloutEvent&)>;
  absl::StatusOr<uint64_t> Watch(const std::string& rollout_id, EventSink sink);
  void Unwatch(uint64_t watch_id);
  // Every event line of the rollout ("" = of every rollout) until
  // UnwatchLines; the sink runs on the stream's writer and must not block.
  using LineSink =
      std::function<void(const events::Event& event, const std::string& line)>;
  absl::StatusOr<uint64_t> WatchLines(const std::string& rollout_id,
                                      LineSink sink);
  void UnwatchLines(uint64_t watch_id);
  // Whether the rollout is open (a watch ends when it is not).
  bool IsOpen(const std::string& rollout_id);
  void CountWatchMissed(uint64_t n) { watch_missed_ += n; }

  // Whether a process is inside any sandfence sandbox on the host (its
  // cgroup or an ancestor is one): such a caller is refused every call.
  bool InsideSandbox(pid_t pid);
  void CountRefusedCall() { ++refused_calls_; }

  // Ends every rollout a stopped daemon left (created sandboxes killed,
  // hooks and guard removed), removes the state files, and removes the
  // host's pinned state if no other sandfence process uses it (`sandfence
  // daemon --cleanup`); the records stay. Unavailable while a daemon runs.
  static absl::Status Cleanup(const ManagerOptions& options);

  HostEnforcement& enforcement() { return *enforcement_; }

 private:
  struct Rollout;
  // An open rollout, held under its lock while this lives
  // (rollout_internal.h).
  class OpenRollout;

  RolloutManager(ManagerOptions options,
                 std::unique_ptr<HostEnforcement> enforcement,
                 std::unique_ptr<StateStore> store);
  absl::StatusOr<v1::StartRolloutResponse> StartOrRefuse(
      const v1::StartRolloutRequest& request);
  absl::Status StartLocked(const v1::StartRolloutRequest& request,
                           Rollout* rollout);
  // What Start and Check share: the policy, the sandbox's spec, the
  // compiled policy, the network namespace. With `reserve_for`, an
  // existing cgroup nobody owns is reserved for it; Check passes null.
  struct PreparedStart {
    SandboxSpec spec;
    std::string borrowed_from;  // the open rollout that owns the cgroup
    UniqueFd netns;             // spec.netns_fd, open while it is used
  };
  absl::StatusOr<PreparedStart> Prepare(const v1::StartRolloutRequest& request,
                                        Rollout* reserve_for);
  absl::Status RequestTooLarge(size_t bytes) const;
  absl::Status Adopt(v1::RolloutState state);
  void AdoptUnowned(const OrphanSandbox& orphan);
  std::shared_ptr<Rollout> Find(const std::string& rollout_id);
  // The rollout, locked, if it is open; else NotFound ("no open rollout"),
  // also for one that ended (or failed to start) while its lock was awaited.
  absl::StatusOr<OpenRollout> FindOpen(const std::string& rollout_id);
  absl::StatusOr<v1::RolloutRecord> MergedRecord(const Rollout& rollout);
  void EventLoop();
  void ReapRuns();
  // Ends every open rollout whose sandbox cgroup is gone: removed (or
  // replaced by another at its path) without EndRollout. Its state is
  // freed as an end frees it, and its record says how it ended.
  void ReclaimGone();
  // The cgroup a request may use as a sandbox, or why not.
  absl::StatusOr<CgroupRef> CheckExistingCgroup(const std::string& path);
  std::string FinalRecordPath(absl::string_view rollout_id) const;
  std::string JournalPath(absl::string_view rollout_id, int segment) const;
  void Publish(const Rollout& rollout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the sandbox's decisions for the metrics.
  void CountDecisions(Sandbox& sandbox);
  // EntrySupervisor's hooks (rollout_supervision.cc).
  absl::StatusOr<std::string> AdmitEntry(const std::string& rollout_id,
                                         pid_t caller);
  void EntryAdmitted(const std::string& rollout_id);
  absl::Status AnswerEntered(const std::string& rollout_id,
                             uint64_t home_mount_ns,
                             confine::SocketSupervisor& supervisor);

  const ManagerOptions options_;
  std::unique_ptr<HostEnforcement> enforcement_;
  std::unique_ptr<StateStore> store_;
  std::string cgroup_parent_;
  const BootClock clock_ = BootClock::Capture();

  std::thread event_thread_;
  // Set once before serving (ServeSupervision); stopped first.
  std::unique_ptr<EntrySupervisor> supervision_;
  std::atomic<bool> stop_{false};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Rollout>> rollouts_
      ABSL_GUARDED_BY(mu_);
  // The rollout whose policy governs each sandbox (by cgroup id), reserved
  // when a start decides it owns the cgroup: borrowing is decided and
  // recorded in one step.
  absl::flat_hash_map<uint64_t, std::string> owner_of_ ABSL_GUARDED_BY(mu_);
  // What List shows, updated as rollouts change: List never waits for a
  // rollout's call.
  absl::flat_hash_map<std::string, v1::RolloutSummary> views_
      ABSL_GUARDED_BY(mu_);
  // Sandboxes of dead daemons that no state names: kept enforced.
  std::vector<std::unique_ptr<Sandbox>> unowned_ ABSL_GUARDED_BY(mu_);

  struct WatchEntry {
    std::shared_ptr<Rollout> rollout;
    uint64_t listener = 0;
  };
  absl::Mutex watch_mu_;
  absl::flat_hash_map<uint64_t, WatchEntry> watches_ ABSL_GUARDED_BY(watch_mu_);
  uint64_t next_watch_id_ ABSL_GUARDED_BY(watch_mu_) = 1;

  // sandfence's own paths (state, records, policies, pins, the socket):
  // what a process entering a sandbox may not reach.
  absl::Mutex own_paths_mu_;
  std::vector<std::string> own_paths_ ABSL_GUARDED_BY(own_paths_mu_);

  // Every rollout's counts for the metrics' sums, the ended ones' kept:
  // Metrics observes and End retires, each under the rollout's lock.
  RolloutTotals totals_;
  std::atomic<uint64_t> started_{0}, ended_{0}, adopted_{0}, allowed_{0},
      denied_{0}, switches_{0}, refusals_{0}, watch_missed_{0},
      refused_calls_{0}, reaped_{0}, gone_{0};
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_ROLLOUT_MANAGER_H_
