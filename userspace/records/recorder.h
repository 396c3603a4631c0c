// Turning a rollout's kernel events into its record, as they arrive.
//
// RolloutRecorder writes one rollout's record file: the header when it is
// created, phase marks as the rollout moves on, folded network attempts
// (records/folding.h) as events arrive, folded DNS queries as the sandbox's
// DNS filter decides them (AddDnsQuery), periodic count updates and loss
// snapshots, and the trailer with the final loss accounting. RecordRouter
// sits behind one NetEventReader and hands each event to the recorder of
// the sandbox that judged it; several rollouts may be open at once.
//
// Wiring, for one sandbox (the order matters: see BeginPhase):
//   RecordRouter router;                            // one per event reader
//   auto rec = router.Open(path, info, policy);     // header on disk
//   rec->BeginPhase("agent");                       // before the kernel
//   controller->AddSandbox(fd, id, *policy.FindPhase("agent"));
//   rec->BindGeneration(*controller->Generation(id));
//   reader callback: router.OnEvent(e); poll loop: router.Tick();
//   ... rec->BeginPhase("verify"); controller->SwitchPhase(...);
//       rec->BindGeneration(...);
//   end: kill the sandbox's processes, drain the reader, then
//   router.Close(id, {.kernel = controller->RemoveSandbox(id)})
#ifndef SANDFENCE_RECORDS_RECORDER_H_
#define SANDFENCE_RECORDS_RECORDER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "compile/compiled_policy.h"
#include "egress/egress_controller.h"
#include "egress/net_event.h"
#include "records/boot_clock.h"
#include "records/folding.h"
#include "records/journal.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {

struct RolloutInfo {
  std::string rollout_id;
  std::string cgroup_path;
  uint64_t cgroup_id = 0;
  std::string host;               // empty: this machine's host name
  std::string sandfence_version;  // empty: this build's version
};

struct RecorderOptions {
  // Folded entries per record; past it, attempts go to overflow entries.
  size_t max_entries = 10000;
  // The same for DNS queries, a table of their own.
  size_t max_dns_entries = 10000;
  // How often buffered entries and count updates reach the file while
  // events arrive (and at Tick()): a crash loses at most this much.
  absl::Duration flush_interval = absl::Milliseconds(200);
  // Buffered bytes that force a write before the interval is up.
  size_t flush_bytes = 256 << 10;
  // fdatasync(2) at every phase change and at the end.
  bool sync = true;
  // Replace an existing file at the path instead of refusing.
  bool overwrite = false;
  // The sandbox's kernel counters, for loss snapshots in the journal (at
  // phase changes and every loss_snapshot_interval); optional.
  std::function<absl::StatusOr<SandboxCounters>()> counters;
  absl::Duration loss_snapshot_interval = absl::Seconds(5);
};

// What the caller knows when the rollout ends.
struct FinalCounts {
  // The sandbox's counters, read after its processes are gone and the
  // reader drained (EgressController::RemoveSandbox). nullopt: not read;
  // the record then cannot show it is whole and says lossy.
  std::optional<SandboxCounters> kernel;
  // NetEventReader::decode_errors() over the rollout's life (a reader-wide
  // count is an upper bound, and fine).
  uint64_t decode_errors = 0;
  // Events for sandboxes with no open rollout (RecordRouter fills it).
  uint64_t unrouted_events = 0;
  // The process guard: events the kernel lost for this sandbox, and guard
  // records that could not be decoded while it was open.
  uint64_t guard_events_lost = 0;
  uint64_t guard_decode_errors = 0;
};

struct RecordOutcome {
  v1::LossAccounting loss;
  bool lossy = false;
  std::vector<std::string> warnings;  // as `records show` would print them
  size_t entries = 0;                 // folded entries in the record
  size_t dns_entries = 0;             // folded DNS entries in the record
  uint64_t bytes = 0;                 // size of the record file
};

// The DNS queries the rollout's filter decided (issue 14), for the
// daemon's metrics: counts by verdict (dns::VerdictName: "allowed",
// "blocked", "malformed" = FORMERR, "upstream_failed" and "learn_failed" =
// SERVFAIL, ...), and a histogram of the filter's own latency per query.
struct DnsQueryStats {
  // Upper bounds of the latency buckets, in seconds; one more bucket
  // (+Inf) holds the rest.
  static constexpr std::array<double, 10> kLatencyBounds = {
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 100e-3, 1.0};

  std::map<std::string, uint64_t> by_verdict;
  // Queries per bucket (not cumulative); the last is +Inf.
  std::array<uint64_t, kLatencyBounds.size() + 1> latency_buckets{};
  uint64_t latency_count = 0;  // queries with a known latency
  double latency_sum_seconds = 0;
};

// A cut connection as records and replies say it.
v1::CutConnection CutToProto(const CutConnection& c);

// Thread-safe: events may arrive on a reader thread while another thread
// begins phases and finalizes.
class RolloutRecorder {
 public:
  // Creates the record file and writes (and flushes) its header: the
  // rollout's metadata and the compiled rules of every phase of policy.
  static absl::StatusOr<std::unique_ptr<RolloutRecorder>> Create(
      const std::string& path, const RolloutInfo& info,
      const CompiledPolicy& policy, const BootClock& clock,
      RecorderOptions options = {});

  uint64_t cgroup_id() const { return cgroup_id_; }
  const std::string& path() const { return path_; }

  // Starts the next span of the timeline (and ends the current one) with
  // the phase of that name in the policy. Call it BEFORE the kernel
  // switches (AddSandbox/SwitchPhase), then BindGeneration after: an event
  // whose generation is not bound yet is put in the newest span, which is
  // then the only one it can belong to.
  absl::Status BeginPhase(absl::string_view phase_name);
  // The kernel generation of the current span (EgressController::
  // Generation): later events of that generation land in this span even
  // when they are read after the next phase began.
  void BindGeneration(uint32_t generation);

  // Folds one event. False if the recorder is already finalized (the
  // caller counts it elsewhere).
  bool Add(const NetEvent& event);

  // Folds one DNS query into the record (DnsQueryInfo: records/folding.h),
  // in the span of its generation as for events. Strings are made safe for
  // the record (printable ASCII, bounded); an empty verdict is recorded as
  // "unknown". False if already finalized (the caller counts it elsewhere).
  bool AddDnsQuery(const DnsQueryInfo& query);
  // Every DNS query AddDnsQuery was given (also those the record could not
  // keep), by verdict, with the filter's latency.
  DnsQueryStats dns_stats() const;

  // What the switch into the current span cut (Sandbox::SwitchPhase), or
  // why it could not: the span says so.
  void NoteCut(const std::vector<CutConnection>& cut,
               const std::string& not_cut);

  // Process-guard reports (filled by the guard module; phase set here).
  void SetGuardEnforcement(absl::string_view mode);  // "lsm", "signal", "off"
  void AddGuardEntry(v1::GuardEntry entry);
  // A warning the record must carry (what a successor found, say).
  void AddWarning(v1::WarningKind kind, std::string text);

  // Flushes if the flush interval has passed (for an idle poll loop).
  absl::Status Tick();

  // Ends the current span, writes the final counts, the loss accounting and
  // the trailer, syncs and closes the file. Once only.
  absl::StatusOr<RecordOutcome> Finalize(const FinalCounts& counts);

 private:
  struct Span {
    std::string name;
    int policy_index = -1;  // into policy_.phases
  };

  RolloutRecorder(std::string path, uint64_t cgroup_id, BootClock clock,
                  CompiledPolicy policy, RecorderOptions options,
                  RecordJournal journal);

  uint32_t SpanFor(uint32_t generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSpan(std::string name, int policy_index, uint64_t boot_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndSpan(uint64_t boot_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::NetAttempt ToAttempt(const FoldedEntry& f) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::DnsQuery ToDnsQuery(const DnsFoldedEntry& f) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The count updates of the entries folded into since the last call
  // (attempts and DNS queries).
  void AppendCounts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendDnsCounts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::LossAccounting Loss() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FlushLocked(bool sync, bool snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MaybeFlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const uint64_t cgroup_id_;
  const BootClock clock_;
  const CompiledPolicy policy_;
  const RecorderOptions options_;

  mutable absl::Mutex mu_;
  RecordJournal journal_ ABSL_GUARDED_BY(mu_);
  AttemptFolder folder_ ABSL_GUARDED_BY(mu_);
  DnsQueryFolder dns_folder_ ABSL_GUARDED_BY(mu_);
  std::vector<Span> timeline_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, uint32_t> span_of_generation_
      ABSL_GUARDED_BY(mu_);
  std::optional<SandboxCounters> last_counters_ ABSL_GUARDED_BY(mu_);
  uint64_t reader_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t supervisor_decided_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dns_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  DnsQueryStats dns_stats_ ABSL_GUARDED_BY(mu_);
  uint64_t guard_recorded_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_flush_mono_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_snapshot_mono_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool finalized_ ABSL_GUARDED_BY(mu_) = false;
};

// Routes events from one reader to the open rollouts by sandbox cgroup id.
// Thread-safe.
class RecordRouter {
 public:
  explicit RecordRouter(BootClock clock = BootClock::Capture())
      : clock_(std::move(clock)) {}

  const BootClock& clock() const { return clock_; }

  // Creates the rollout's record (RolloutRecorder::Create) and routes the
  // events of sandbox info.cgroup_id to it. One open rollout per sandbox.
  absl::StatusOr<std::shared_ptr<RolloutRecorder>> Open(
      const std::string& path, const RolloutInfo& info,
      const CompiledPolicy& policy, RecorderOptions options = {});

  // The NetEventReader callback. An event for a sandbox with no open
  // rollout is counted (unrouted_events), never dropped silently.
  void OnEvent(const NetEvent& event);

  // RolloutRecorder::Tick for every open rollout; the first error.
  absl::Status Tick();

  // Stops routing to the sandbox's rollout and finalizes its record, with
  // the events that were unrouted while it was open.
  absl::StatusOr<RecordOutcome> Close(uint64_t cgroup_id, FinalCounts counts);

  uint64_t unrouted_events() const;
  size_t open_rollouts() const;

 private:
  struct OpenRollout {
    std::shared_ptr<RolloutRecorder> recorder;
    uint64_t unrouted_at_open = 0;
  };

  const BootClock clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, OpenRollout> open_ ABSL_GUARDED_BY(mu_);
  uint64_t unrouted_ ABSL_GUARDED_BY(mu_) = 0;
};

// "tcp 10.1.2.3:8000", "udp [2001:db8::]/32:53-54": a compiled rule on one
// line, as `sandfence check` prints it.
std::string RuleText(const Rule& rule);

// The header part of a record for a compiled policy's phases, and back: a
// record (or a daemon's saved state) holds exactly what was enforced.
v1::PhasePolicy ToPhasePolicy(const CompiledPhase& phase);
// The record's verdict of a kernel verdict (would deny: VERDICT_AUDIT_DENY).
v1::Verdict VerdictOf(sf_verdict verdict);
absl::StatusOr<CompiledPhase> FromPhasePolicy(const v1::PhasePolicy& phase);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_RECORDER_H_
