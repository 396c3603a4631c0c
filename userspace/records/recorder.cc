// A rollout's record file as the rollout runs: the header, the phase
// spans, the flushes with their count updates and loss snapshots, and the
// trailer (records/recorder.h).
#include "records/recorder.h"

#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "sandfence/version.h"

namespace sandfence {
namespace {

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

v1::RecordJournalEntry PhaseMark(uint32_t index, v1::PhaseSpan span) {
  v1::RecordJournalEntry e;
  e.mutable_phase()->set_index(index);
  *e.mutable_phase()->mutable_span() = std::move(span);
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RolloutRecorder>> RolloutRecorder::Create(
    const std::string& path, const RolloutInfo& info,
    const CompiledPolicy& policy, const BootClock& clock,
    RecorderOptions options) {
  absl::StatusOr<RecordJournal> journal =
      RecordJournal::Create(path, options.overwrite);
  if (!journal.ok()) return journal.status();

  v1::RecordJournalEntry entry;
  v1::RecordHeader* header = entry.mutable_header();
  header->set_format(kRecordFormat);
  v1::RolloutRecord* r = header->mutable_record();
  r->set_rollout_id(info.rollout_id);
  r->mutable_sandbox()->set_cgroup_path(info.cgroup_path);
  r->mutable_sandbox()->set_cgroup_id(info.cgroup_id);
  r->set_host(info.host.empty() ? HostName() : info.host);
  r->set_sandfence_version(info.sandfence_version.empty()
                               ? SANDFENCE_VERSION
                               : info.sandfence_version);
  r->mutable_policy()->set_name(policy.name);
  r->mutable_policy()->set_content_hash(policy.content_hash);
  for (const CompiledPhase& phase : policy.phases) {
    *r->add_phase_policy() = ToPhasePolicy(phase);
    if (phase.audit_only) r->add_audit_only_phase(phase.name);
  }
  r->mutable_enforcement()->set_egress("cgroup-bpf");
  *r->mutable_start_time() = clock.ToTimestamp(clock.NowBootNs());
  journal->Append(entry);
  if (absl::Status s = journal->Flush(options.sync); !s.ok()) return s;

  return std::unique_ptr<RolloutRecorder>(
      new RolloutRecorder(path, info.cgroup_id, clock, policy,
                          std::move(options), *std::move(journal)));
}

RolloutRecorder::RolloutRecorder(std::string path, uint64_t cgroup_id,
                                 BootClock clock, CompiledPolicy policy,
                                 RecorderOptions options, RecordJournal journal)
    : path_(std::move(path)),
      cgroup_id_(cgroup_id),
      clock_(std::move(clock)),
      policy_(std::move(policy)),
      options_(std::move(options)),
      journal_(std::move(journal)),
      folder_(options_.max_entries),
      dns_folder_(options_.max_dns_entries) {
  last_flush_mono_ns_ = last_snapshot_mono_ns_ = MonoNs();
}

void RolloutRecorder::StartSpan(std::string name, int policy_index,
                                uint64_t boot_ns) {
  v1::PhaseSpan span;
  span.set_name(name);
  *span.mutable_start_time() = clock_.ToTimestamp(boot_ns);
  journal_.Append(
      PhaseMark(static_cast<uint32_t>(timeline_.size()), std::move(span)));
  timeline_.push_back(Span{std::move(name), policy_index});
}

void RolloutRecorder::EndSpan(uint64_t boot_ns) {
  if (timeline_.empty()) return;
  v1::PhaseSpan span;
  *span.mutable_end_time() = clock_.ToTimestamp(boot_ns);
  journal_.Append(
      PhaseMark(static_cast<uint32_t>(timeline_.size() - 1), std::move(span)));
}

absl::Status RolloutRecorder::BeginPhase(absl::string_view phase_name) {
  int index = -1;
  for (size_t i = 0; i < policy_.phases.size(); ++i) {
    if (policy_.phases[i].name == phase_name) index = static_cast<int>(i);
  }
  if (index < 0) {
    return Malformed(absl::StrCat(
        "phase \"", phase_name, "\" is not in policy \"", policy_.name, "\""));
  }
  absl::MutexLock lock(&mu_);
  if (finalized_) {
    return absl::FailedPreconditionError("the record is already finalized");
  }
  const uint64_t now = clock_.NowBootNs();
  AppendCounts();  // the counts so far belong before the mark
  EndSpan(now);
  StartSpan(std::string(phase_name), index, now);
  return FlushLocked(options_.sync, /*snapshot=*/true);
}

void RolloutRecorder::BindGeneration(uint32_t generation) {
  absl::MutexLock lock(&mu_);
  if (finalized_ || timeline_.empty()) return;
  const uint32_t index = static_cast<uint32_t>(timeline_.size() - 1);
  span_of_generation_[generation] = index;
  v1::PhaseSpan span;
  span.set_generation(generation);
  journal_.Append(PhaseMark(index, std::move(span)));
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

void RolloutRecorder::NoteCut(const std::vector<CutConnection>& cut,
                              const std::string& not_cut) {
  absl::MutexLock lock(&mu_);
  if (finalized_ || timeline_.empty()) return;
  v1::PhaseSpan span;
  for (const CutConnection& c : cut) *span.add_cut() = CutToProto(c);
  span.set_not_cut(not_cut);
  const uint32_t index = static_cast<uint32_t>(timeline_.size() - 1);
  journal_.Append(PhaseMark(index, std::move(span)));
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

uint32_t RolloutRecorder::SpanFor(uint32_t generation) {
  if (auto it = span_of_generation_.find(generation);
      it != span_of_generation_.end()) {
    return it->second;
  }
  if (timeline_.empty()) {
    // Events before any BeginPhase: a misuse, but they are still kept.
    StartSpan("(before the first phase)", -1, clock_.NowBootNs());
  }
  return static_cast<uint32_t>(timeline_.size() - 1);
}

void RolloutRecorder::SetGuardEnforcement(absl::string_view mode) {
  absl::MutexLock lock(&mu_);
  if (finalized_) return;
  v1::RecordJournalEntry e;
  e.mutable_enforcement()->set_guard(std::string(mode));
  journal_.Append(e);
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

void RolloutRecorder::AddWarning(v1::WarningKind kind, std::string text) {
  absl::MutexLock lock(&mu_);
  if (finalized_) return;
  v1::RecordJournalEntry e;
  e.mutable_warning()->set_kind(kind);
  e.mutable_warning()->set_text(std::move(text));
  journal_.Append(e);
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

void RolloutRecorder::AppendCounts() {
  AppendDnsCounts();
  std::vector<uint32_t> dirty = folder_.TakeDirty();
  if (dirty.empty()) return;
  v1::RecordJournalEntry e;
  v1::NetAttemptCounts* counts = e.mutable_counts();
  for (uint32_t id : dirty) {
    const FoldedEntry& f = folder_.entry(id);
    v1::NetAttemptCount* c = counts->add_count();
    c->set_id(id);
    c->set_count(f.count);
    *c->mutable_last_time() = UnixNsToTimestamp(f.last_unix_ns);
    c->set_last_pid(f.last_pid);
    c->set_last_tgid(f.last_tgid);
  }
  journal_.Append(e);
}

void RolloutRecorder::AppendDnsCounts() {
  std::vector<uint32_t> dirty = dns_folder_.TakeDirty();
  if (dirty.empty()) return;
  v1::RecordJournalEntry e;
  v1::DnsQueryCounts* counts = e.mutable_dns_counts();
  for (uint32_t id : dirty) {
    const DnsFoldedEntry& f = dns_folder_.entry(id);
    v1::DnsQueryCount* c = counts->add_count();
    c->set_id(id);
    c->set_count(f.count);
    *c->mutable_last_time() = UnixNsToTimestamp(f.last_unix_ns);
    c->set_rcode(f.rcode);
    c->set_transport(f.transport);
    for (const IpAddress& a : f.addresses) c->add_address(a.ToString());
    c->set_addresses_more(f.addresses_more);
    c->set_unreplied(f.unreplied);
  }
  journal_.Append(e);
}

v1::LossAccounting RolloutRecorder::Loss() const {
  v1::LossAccounting loss;
  if (last_counters_) {
    loss.set_kernel_counters_read(true);
    loss.set_kernel_allowed(last_counters_->allowed);
    loss.set_kernel_denied(last_counters_->denied);
    loss.set_kernel_allowed_unreported(last_counters_->allowed_unreported);
    loss.set_kernel_events_lost(last_counters_->events_lost);
    loss.set_kernel_audit_denied(last_counters_->audit_denied);
    if (const std::optional<EgressBudgetCounts>& b = last_counters_->budget) {
      v1::EgressBudgetUse* u = loss.mutable_egress_budget();
      u->set_max_connections(b->limits.connections);
      u->set_max_bytes(b->limits.bytes);
      u->set_max_bytes_per_address(b->limits.bytes_per_address);
      u->set_connections(b->connections);
      u->set_bytes(b->bytes);
      u->set_dropped_packets(b->dropped_packets);
      u->set_dropped_bytes(b->dropped_bytes);
      u->set_addresses(b->addresses);
    }
  }
  loss.set_events_recorded(folder_.total());
  loss.set_reader_dropped(reader_dropped_);
  loss.set_supervisor_decided(supervisor_decided_);
  loss.set_overflowed(folder_.overflowed());
  loss.set_guard_events_recorded(guard_recorded_);
  loss.set_dns_queries(dns_folder_.total());
  loss.set_dns_overflowed(dns_folder_.overflowed());
  loss.set_dns_dropped(dns_dropped_);
  return loss;
}

absl::Status RolloutRecorder::FlushLocked(bool sync, bool snapshot) {
  AppendCounts();
  const int64_t now = MonoNs();
  if (options_.counters &&
      (snapshot ||
       now - last_snapshot_mono_ns_ >=
           absl::ToInt64Nanoseconds(options_.loss_snapshot_interval))) {
    last_snapshot_mono_ns_ = now;
    if (absl::StatusOr<SandboxCounters> c = options_.counters(); c.ok()) {
      last_counters_ = *c;
      v1::RecordJournalEntry e;
      *e.mutable_loss() = Loss();
      journal_.Append(e);
    }
  }
  last_flush_mono_ns_ = now;
  return journal_.Flush(sync);
}

absl::Status RolloutRecorder::MaybeFlushLocked() {
  if (journal_.buffered_bytes() >= options_.flush_bytes) {
    return FlushLocked(/*sync=*/false, /*snapshot=*/false);
  }
  if (MonoNs() - last_flush_mono_ns_ >=
      absl::ToInt64Nanoseconds(options_.flush_interval)) {
    return FlushLocked(/*sync=*/false, /*snapshot=*/false);
  }
  return absl::OkStatus();
}

absl::Status RolloutRecorder::Tick() {
  absl::MutexLock lock(&mu_);
  if (finalized_) return absl::OkStatus();
  return MaybeFlushLocked();
}

absl::StatusOr<RecordOutcome> RolloutRecorder::Finalize(
    const FinalCounts& counts) {
  absl::MutexLock lock(&mu_);
  if (finalized_) {
    return absl::FailedPreconditionError("the record is already finalized");
  }
  finalized_ = true;
  const uint64_t now = clock_.NowBootNs();
  AppendCounts();
  EndSpan(now);
  last_counters_ = counts.kernel;

  v1::RolloutRecord summary;  // just enough of the record to judge its loss
  summary.set_complete(true);
  v1::LossAccounting* loss = summary.mutable_loss();
  *loss = Loss();
  loss->set_decode_errors(counts.decode_errors);
  loss->set_unrouted_events(counts.unrouted_events);
  loss->set_guard_events_lost(counts.guard_events_lost);
  loss->set_guard_decode_errors(counts.guard_decode_errors);
  EvaluateLoss(&summary);

  v1::RecordJournalEntry e;
  *e.mutable_trailer()->mutable_end_time() = clock_.ToTimestamp(now);
  *e.mutable_trailer()->mutable_loss() = *loss;
  journal_.Append(e);
  if (absl::Status s = journal_.Close(); !s.ok()) return s;

  RecordOutcome out;
  out.loss = *loss;
  out.lossy = summary.lossy();
  for (const v1::RecordWarning& w : summary.warning()) {
    out.warnings.push_back(w.text());
  }
  out.entries = folder_.size();
  out.dns_entries = dns_folder_.size();
  out.bytes = journal_.bytes_written();
  return out;
}

}  // namespace sandfence
