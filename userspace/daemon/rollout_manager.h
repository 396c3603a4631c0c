// The daemon's core, without gRPC: every open rollout on the host, over one
// pinned egress controller, one event reader and one record router.
//
//   Start     compile (refusals come back before anything is created or
//             attached), create or open the sandbox, open the record,
//             attach, persist the rollout's state for a later daemon.
//   SetPhase  the record's span first, then the kernel's atomic switch.
//   End       kill a created sandbox's processes, drain the events, detach,
//             finalize the journal, write the merged record.
//   Adopt     (at start-up) take over every rollout an earlier daemon left
//             pinned: egress enforcement never stopped; the record continues
//             in a new journal file and the gap is marked in the merged
//             record. The process guard is not pinned: adopted sandboxes
//             are added to this daemon's guard again.
//
// The process guard: one GuardController for the daemon's life, loaded by
// the first rollout whose initial phase wants one. A rollout's guard mode
// is its initial phase's, fixed for the rollout (the record says so when a
// later phase asks for another).
//
// Thread-safe: calls for different rollouts run in parallel; calls for one
// rollout are serialized.
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
#include "common/unique_fd.h"
#include "compile/compiled_policy.h"
#include "common/cgroup.h"
#include "egress/egress_controller.h"
#include "egress/net_event.h"
#include "guard/guard_abi.h"
#include "guard/guard_controller.h"
#include "guard/guard_types.h"
#include "records/recorder.h"
#include "sandfence/v1/daemon.pb.h"

namespace sandfence {

struct ManagerOptions {
  // Pinned programs, links and maps (empty: nothing survives the daemon).
  std::string pin_dir = "/sys/fs/bpf/sandfence";
  // One state file per open rollout, for the next daemon to adopt.
  std::string state_dir = "/run/sandfence/rollouts";
  std::string records_dir = "/var/lib/sandfence/records";
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
};

// What the Prometheus endpoint shows.
struct ManagerMetrics {
  uint64_t rollouts_open = 0;
  uint64_t rollouts_started = 0;
  uint64_t rollouts_ended = 0;
  uint64_t rollouts_adopted = 0;
  uint64_t decisions_allowed = 0;  // events read, by verdict
  uint64_t decisions_denied = 0;
  uint64_t events_lost = 0;  // kernel-side, open rollouts
  uint64_t decode_errors = 0;
  uint64_t phase_switches = 0;
  uint64_t refusals = 0;
};

// Rollout ids: 1..128 of [A-Za-z0-9_.-], not starting with '.'.
absl::Status ValidateRolloutId(absl::string_view id);

class RolloutManager {
 public:
  // Loads (or reuses the pinned) egress programs. Needs root. Unavailable
  // when another manager (daemon) uses the same state_dir.
  static absl::StatusOr<std::unique_ptr<RolloutManager>> Create(
      ManagerOptions options);
  // Stops the event reader. Open rollouts stay enforced (pinned) for the
  // next daemon; nothing is detached.
  ~RolloutManager();

  // Takes over every rollout in state_dir; returns the ids adopted. Call
  // once, before serving; starts the event reader.
  std::vector<std::string> AdoptAndStart();

  absl::StatusOr<v1::StartRolloutResponse> Start(
      const v1::StartRolloutRequest& request);
  absl::StatusOr<v1::SetPhaseResponse> SetPhase(const std::string& rollout_id,
                                                const std::string& phase);
  absl::StatusOr<v1::EndRolloutResponse> End(const std::string& rollout_id);
  absl::StatusOr<v1::GetRecordResponse> GetRecord(
      const std::string& rollout_id);
  v1::ListRolloutsResponse List();
  v1::HealthResponse Health();
  ManagerMetrics Metrics();

  // Calls `sink` (on the reader thread) with every event of the rollout
  // until Unwatch; the sink must not block.
  using EventSink = std::function<void(const v1::RolloutEvent&)>;
  absl::StatusOr<uint64_t> Watch(const std::string& rollout_id, EventSink sink);
  void Unwatch(uint64_t watch_id);
  // Whether the rollout is open (a watch ends when it is not).
  bool IsOpen(const std::string& rollout_id);

  // Detaches every pinned sandbox and removes the pins and state files
  // (`sandfence daemon --cleanup`); the records stay.
  static absl::Status Cleanup(const ManagerOptions& options);

 private:
  struct Rollout;

  explicit RolloutManager(ManagerOptions options);
  absl::Status StartLocked(const v1::StartRolloutRequest& request,
                           Rollout* rollout);
  absl::Status Persist(const Rollout& rollout);
  absl::Status Adopt(v1::RolloutState state);
  std::shared_ptr<Rollout> Find(const std::string& rollout_id);
  // The record of all the rollout's journals (one per daemon life), with
  // the gaps between them marked.
  absl::StatusOr<v1::RolloutRecord> MergedRecord(const Rollout& rollout);
  void ReaderLoop();
  void OnEvent(const NetEvent& event);
  void OnGuardEvent(const sf_guard_event& event);
  // The daemon's guard for a rollout that asks for `mode` (not kOff),
  // loaded on first use. Rejected when the mode cannot be had here (lsm
  // where lsm cannot run, or on a daemon whose guard already runs signal).
  absl::StatusOr<GuardController*> GuardFor(GuardMode mode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_mu_);
  // Governs the rollout's sandbox by the guard and routes its events to
  // the rollout's record; returns the enforcer's name for the record.
  absl::StatusOr<std::string> Guard(Rollout* rollout, const std::string& path,
                                    uint64_t cgroup_id, GuardMode mode);
  // Reads what is queued, then stops guarding the rollout's sandbox.
  void Unguard(Rollout* rollout);
  std::string StatePath(absl::string_view rollout_id) const;
  std::string FinalRecordPath(absl::string_view rollout_id) const;

  const ManagerOptions options_;
  // flock(2)ed for the manager's life: two daemons over the same state
  // (and pins) would hand out the same generations.
  UniqueFd lock_;
  std::string cgroup_parent_;
  std::unique_ptr<EgressController> controller_;
  RecordRouter router_;

  // The process guard (loaded by the first guarded rollout) and its event
  // reader, polled by reader_thread_ too. The guard's programs are not
  // pinned: they end with the daemon.
  absl::Mutex guard_mu_;
  std::optional<GuardController> guard_ ABSL_GUARDED_BY(guard_mu_);
  std::optional<GuardEventReader> guard_reader_ ABSL_GUARDED_BY(guard_mu_);
  // Guard events by sandbox cgroup id: the owner's record, and the offset
  // from the events' CLOCK_MONOTONIC to the Unix epoch.
  struct GuardRoute {
    std::shared_ptr<RolloutRecorder> recorder;
    int64_t mono_to_unix_ns = 0;
  };
  absl::Mutex guard_route_mu_;
  absl::flat_hash_map<uint64_t, GuardRoute> guard_routes_
      ABSL_GUARDED_BY(guard_route_mu_);

  // Reader: polled by reader_thread_, drained by End under reader_mu_.
  absl::Mutex reader_mu_;
  std::unique_ptr<NetEventReader> reader_ ABSL_GUARDED_BY(reader_mu_);
  std::thread reader_thread_;
  std::atomic<bool> stop_{false};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Rollout>> rollouts_
      ABSL_GUARDED_BY(mu_);
  // The rollout whose policy governs each attached sandbox (by cgroup id):
  // borrowing is decided here, without touching other rollouts' state.
  absl::flat_hash_map<uint64_t, std::string> owner_of_ ABSL_GUARDED_BY(mu_);
  // What the record of each attached sandbox says of the process guard: a
  // borrowing rollout's record says the same (the owner's guard governs).
  absl::flat_hash_map<uint64_t, std::string> guard_of_ ABSL_GUARDED_BY(mu_);
  // Watchers by sandbox cgroup id.
  struct Watcher {
    uint64_t id;
    std::string rollout_id;
    EventSink sink;
  };
  absl::Mutex watch_mu_;
  absl::flat_hash_map<uint64_t, std::vector<Watcher>> watchers_
      ABSL_GUARDED_BY(watch_mu_);
  uint64_t next_watch_id_ ABSL_GUARDED_BY(watch_mu_) = 1;

  std::atomic<uint64_t> started_{0}, ended_{0}, adopted_{0}, allowed_{0},
      denied_{0}, switches_{0}, refusals_{0};
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_ROLLOUT_MANAGER_H_
