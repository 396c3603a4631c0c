// The rollout manager's life (creation, the daemon's own paths, its end),
// and an open rollout's calls: Enter, SetPhase, End, GetRecord, the event
// lines (daemon/rollout_manager.h).
#include "daemon/rollout_manager.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "daemon/log.h"
#include "daemon/rollout_internal.h"
#include "daemon/state_store.h"
#include "host/host_state.h"
#include "records/boot_clock.h"
#include "records/journal.h"
#include "records/merged_record.h"
#include "records/recorder.h"
#include "sandbox/kernel_enforcement.h"

namespace sandfence {

using rollout_internal::MtimeNs;
using rollout_internal::PhaseIsAuditOnly;

RolloutManager::RolloutManager(ManagerOptions options,
                               std::unique_ptr<HostEnforcement> enforcement,
                               std::unique_ptr<StateStore> store)
    : options_(std::move(options)),
      enforcement_(std::move(enforcement)),
      store_(std::move(store)) {}

absl::StatusOr<std::unique_ptr<RolloutManager>> RolloutManager::Create(
    ManagerOptions options) {
  // The state directory's lock first: a second daemon must fail before it
  // touches anything of the first's.
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(options.state_dir);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<HostEnforcement>> kernel =
      KernelEnforcementFor(options);
  if (!kernel.ok()) return kernel.status();
  std::unique_ptr<RolloutManager> m(new RolloutManager(
      std::move(options), *std::move(kernel), *std::move(store)));
  if (absl::Status s = MakeDirs(m->options_.records_dir); !s.ok()) return s;
  // Out of every guarded sandbox's reach: a root agent must not rewrite
  // the state a successor adopts, its own record, or the policies.
  for (const std::string* dir :
       {&m->options_.state_dir, &m->options_.records_dir,
        &m->options_.policy_dir}) {
    if (dir->empty() || ::access(dir->c_str(), F_OK) != 0) continue;
    if (absl::Status s = m->Protect(*dir); !s.ok()) return s;
  }
  m->cgroup_parent_ = m->options_.cgroup_parent;
  if (m->cgroup_parent_.empty()) {
    absl::StatusOr<std::string> mount = FindCgroup2Mount();
    if (!mount.ok()) return mount.status();
    m->cgroup_parent_ = absl::StrCat(*mount, "/sandfence");
  }
  return m;
}

absl::StatusOr<std::unique_ptr<HostEnforcement>>
RolloutManager::KernelEnforcementFor(const ManagerOptions& options) {
  KernelEnforcementOptions kopts;
  kopts.host.pin_root = options.pin_dir;
  kopts.host.kind = DriverKind::kDaemon;
  kopts.egress.ring_bytes = options.ring_bytes;
  absl::StatusOr<std::unique_ptr<KernelEnforcement>> kernel =
      KernelEnforcement::Create(kopts);
  if (!kernel.ok()) return kernel.status();
  return std::unique_ptr<HostEnforcement>(*std::move(kernel));
}

absl::StatusOr<std::unique_ptr<RolloutManager>> RolloutManager::CreateWith(
    ManagerOptions options, std::unique_ptr<HostEnforcement> enforcement) {
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(options.state_dir);
  if (!store.ok()) return store.status();
  std::unique_ptr<RolloutManager> m(new RolloutManager(
      std::move(options), std::move(enforcement), *std::move(store)));
  if (absl::Status s = MakeDirs(m->options_.records_dir); !s.ok()) return s;
  m->cgroup_parent_ = m->options_.cgroup_parent.empty()
                          ? "/sys/fs/cgroup/sandfence"
                          : m->options_.cgroup_parent;
  return m;
}

absl::Status RolloutManager::Protect(const std::string& path) {
  {
    absl::MutexLock lock(&own_paths_mu_);
    own_paths_.push_back(path);
  }
  absl::Status s = enforcement_->Protect(path);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("protect ", path,
                                             " from sandboxes: ", s.message()));
}

RolloutManager::~RolloutManager() {
  // Its thread calls into the rollouts: gone before them.
  supervision_.reset();
  stop_ = true;
  if (event_thread_.joinable()) event_thread_.join();
  std::vector<std::shared_ptr<Rollout>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, r] : rollouts_) all.push_back(r);
    for (auto& s : unowned_) s->Release();
  }
  // Open rollouts stay enforced for the next daemon: released, not ended.
  for (const std::shared_ptr<Rollout>& r : all) {
    absl::MutexLock rl(&r->mu);
    if (r->sandbox) r->sandbox->Release();
  }
}

std::string RolloutManager::FinalRecordPath(
    absl::string_view rollout_id) const {
  return absl::StrCat(options_.records_dir, "/", rollout_id, ".record.pb");
}

std::string RolloutManager::JournalPath(absl::string_view rollout_id,
                                        int segment) const {
  if (segment == 0) {
    return absl::StrCat(options_.records_dir, "/", rollout_id, ".record");
  }
  return absl::StrCat(options_.records_dir, "/", rollout_id, ".", segment,
                      ".record");
}

std::shared_ptr<RolloutManager::Rollout> RolloutManager::Find(
    const std::string& rollout_id) {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(rollout_id);
  return it == rollouts_.end() ? nullptr : it->second;
}

absl::StatusOr<RolloutManager::OpenRollout> RolloutManager::FindOpen(
    const std::string& rollout_id) {
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  OpenRollout open(std::move(r));
  if (!open->open()) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  return open;
}

void RolloutManager::Publish(const Rollout& r) {
  v1::RolloutSummary s;
  s.set_rollout_id(r.id());
  s.set_cgroup_path(r.state.response().cgroup_path());
  s.set_cgroup_id(r.cgroup_id());
  s.set_phase(r.state.phase());
  *s.mutable_start_time() = r.state.start_time();
  s.set_borrowed_from(r.state.response().borrowed_from());
  s.set_adopted(r.adopted);
  s.set_generation(r.state.response().generation());
  s.set_audit_only(PhaseIsAuditOnly(r.state, r.state.phase()));
  views_[r.id()] = std::move(s);
}

bool RolloutManager::InsideSandbox(pid_t pid) {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  absl::StatusOr<std::string> rel = CgroupOfPid(pid);
  // A caller whose cgroup cannot be read is refused: unknown is not
  // outside.
  if (!mount.ok() || !rel.ok()) return true;
  const std::vector<uint64_t> sandboxes = enforcement_->AllSandboxes();
  std::string path = absl::StrCat(*mount, *rel == "/" ? "" : *rel);
  while (path.size() > mount->size()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 &&
        std::find(sandboxes.begin(), sandboxes.end(),
                  static_cast<uint64_t>(st.st_ino)) != sandboxes.end()) {
      return true;
    }
    path = path.substr(0, path.rfind('/'));
  }
  return false;
}

absl::StatusOr<v1::EnterRolloutResponse> RolloutManager::Enter(
    const std::string& rollout_id, pid_t caller) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::vector<std::string> own;
  {
    absl::MutexLock lock(&own_paths_mu_);
    own = own_paths_;
  }
  absl::StatusOr<OpenRollout> open = FindOpen(rollout_id);
  if (!open.ok()) return open.status();
  Sandbox& sb = *(*open)->sandbox;
  if (sb.guard_mode() == GuardMode::kOff) {
    return Rejected(absl::StrCat(
        "rollout \"", rollout_id,
        "\" has its process guard off: nothing to confine an entering "
        "process to (start it with a guard mode)"));
  }
  const ConfinePlan plan = sb.ConfinementPlan(
      SandfenceOwnPaths(options_.pin_dir,
                        {options_.state_dir, options_.records_dir,
                         options_.policy_dir}));
  v1::EnterRolloutResponse out;
  out.set_cgroup_path(sb.cgroup().path);
  out.set_phase(sb.phase());
  out.set_allow_io_uring(!plan.deny_io_uring);
  out.set_deny_ptrace(plan.deny_ptrace);
  for (const std::string& p : plan.no_access) out.add_no_access(p);
  for (const std::string& p : own) out.add_no_access(p);
  out.set_guard(sb.guard_text());
  if (sb.recorder() != nullptr) {
    sb.recorder()->AddWarning(
        v1::WARNING_ENTERED,
        absl::StrCat("pid ", caller,
                     " entered through `sandfence enter` in phase \"",
                     sb.phase(), "\", confined by Landlock + seccomp",
                     plan.deny_io_uring ? "" : " (io_uring allowed)",
                     plan.deny_ptrace ? " (no ptrace)" : ""));
  }
  LogInfo("rollout %s: pid %d entered (phase %s)", rollout_id, caller,
          sb.phase());
  return out;
}

absl::StatusOr<v1::SetPhaseResponse> RolloutManager::SetPhase(
    const std::string& rollout_id, const std::string& phase_name) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  absl::StatusOr<OpenRollout> open = FindOpen(rollout_id);
  if (!open.ok()) return open.status();
  OpenRollout& r = *open;
  absl::StatusOr<PhaseChange> change = r->sandbox->SwitchPhase(phase_name);
  if (!change.ok()) return change.status();
  v1::SetPhaseResponse out;
  out.set_previous_phase(change->previous);
  out.set_phase(change->phase);
  out.set_generation(change->generation);
  for (const CutConnection& c : change->cut) *out.add_cut() = CutToProto(c);
  out.set_not_cut(change->not_cut);
  out.set_audit_only(PhaseIsAuditOnly(r->state, change->phase));
  if (!change->changed) return out;
  r->state.set_phase(change->phase);
  r->state.mutable_response()->set_generation(change->generation);
  // The kernel's entry names the phase in force: a crash before this save
  // is corrected by the successor, which believes the kernel.
  if (absl::Status s = store_->Save(r->state); !s.ok()) {
    LogWarning("rollout %s: save state: %s", rollout_id, StatusText(s));
  }
  {
    absl::MutexLock lock(&mu_);
    Publish(*r);
  }
  ++switches_;
  LogInfo("rollout %s: phase %s -> %s (generation %d)", rollout_id,
          out.previous_phase(), out.phase(), out.generation());
  return out;
}

absl::StatusOr<v1::RolloutRecord> RolloutManager::MergedRecord(
    const Rollout& r) {
  std::vector<RecordSegment> segments;
  for (int k = 0; k < r.state.journal_path_size(); ++k) {
    const std::string& path = r.state.journal_path(k);
    absl::StatusOr<v1::RolloutRecord> rec = ReadRecordFile(path);
    if (!rec.ok()) return rec.status();
    RecordSegment seg;
    seg.path = path;
    seg.record = *std::move(rec);
    seg.stopped_unix_ns = MtimeNs(path);
    if (k < r.state.adopted_time_size()) {
      seg.handed_over_unix_ns = TimestampToUnixNs(r.state.adopted_time(k));
    }
    segments.push_back(std::move(seg));
  }
  if (segments.empty()) return absl::InternalError("no journal");
  return MergeRecordSegments(segments);
}

absl::StatusOr<v1::EndRolloutResponse> RolloutManager::End(
    const std::string& rollout_id) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    // A retried EndRollout (its answer was lost) gets the record again.
    absl::StatusOr<std::string> bytes =
        ReadWholeFile(FinalRecordPath(rollout_id));
    v1::EndRolloutResponse again;
    if (bytes.ok() && again.mutable_record()->ParseFromString(*bytes)) {
      again.set_record_path(FinalRecordPath(rollout_id));
      return again;
    }
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::MutexLock rl(&r->mu);
  if (!r->open()) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::StatusOr<SandboxEnd> ended = r->sandbox->End();
  r->ended = true;
  if (supervision_) supervision_->Forget(rollout_id);
  {
    // What the rollout counted stays in the metrics' sums (they are
    // counters: an end must not lower them).
    RolloutReading final;
    if (ended.ok() && ended->counters_read) {
      final.events_lost = ended->counters.events_lost;
    }
    if (r->sandbox->recorder() != nullptr) {
      final.dns = r->sandbox->recorder()->dns_stats();
    }
    totals_.Retire(rollout_id, final);
  }
  store_->Remove(rollout_id);
  // The final record is on disk before the rollout leaves the open set: a
  // caller that no longer finds it open (List, a reclaim it waits for)
  // finds its record (GetRecord), never neither.
  absl::StatusOr<v1::RolloutRecord> record =
      ended.ok() ? MergedRecord(*r) : ended.status();
  v1::EndRolloutResponse out;
  if (record.ok()) {
    if (!ended->cleanup.ok()) {
      LogWarning("rollout %s: end: %s", rollout_id,
                 StatusText(ended->cleanup));
    }
    *out.mutable_record() = *record;
    for (const std::string& p : r->state.journal_path()) {
      out.add_journal_path(p);
    }
    out.set_record_path(FinalRecordPath(rollout_id));
    if (absl::Status s =
            WriteFileAtomic(out.record_path(), record->SerializeAsString());
        !s.ok()) {
      LogError("rollout %s: write record: %s", rollout_id, StatusText(s));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    rollouts_.erase(rollout_id);
    views_.erase(rollout_id);
    auto owner = owner_of_.find(r->cgroup_id());
    if (owner != owner_of_.end() && owner->second == rollout_id) {
      owner_of_.erase(owner);
    }
  }
  ++ended_;
  if (!record.ok()) return record.status();
  LogInfo("ended rollout %s: %d attempts%s", rollout_id,
          record->net_attempt_size(), record->lossy() ? " (lossy)" : "");
  return out;
}

absl::StatusOr<v1::GetRecordResponse> RolloutManager::GetRecord(
    const std::string& rollout_id) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  v1::GetRecordResponse out;
  if (std::shared_ptr<Rollout> r = Find(rollout_id)) {
    absl::MutexLock rl(&r->mu);
    if (r->open()) {
      if (r->sandbox->recorder() != nullptr) {
        r->sandbox->recorder()->Tick().IgnoreError();
      }
      absl::StatusOr<v1::RolloutRecord> rec = MergedRecord(*r);
      if (!rec.ok()) return rec.status();
      *out.mutable_record() = *rec;
      out.set_open(true);
      return out;
    }
  }
  absl::StatusOr<std::string> bytes =
      ReadWholeFile(FinalRecordPath(rollout_id));
  if (!bytes.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no rollout \"", rollout_id, "\", open or ended"));
  }
  if (!out.mutable_record()->ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat("record ", FinalRecordPath(rollout_id), " is corrupt"));
  }
  return out;
}

absl::StatusOr<uint64_t> RolloutManager::WatchLines(
    const std::string& rollout_id, LineSink sink) {
  if (!options_.events) {
    return absl::FailedPreconditionError("this daemon has no event stream");
  }
  if (!rollout_id.empty()) {
    if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
    if (!IsOpen(rollout_id)) {
      return absl::NotFoundError(
          absl::StrCat("no open rollout \"", rollout_id, "\""));
    }
  }
  return options_.events->AddWatcher(
      [rollout_id, sink = std::move(sink)](const events::Event& e,
                                           const std::string& line) {
        // Host-wide lines (the stream's own losses) go to every watcher.
        if (rollout_id.empty() || e.rollout.empty() || e.rollout == rollout_id) {
          sink(e, line);
        }
      });
}

void RolloutManager::UnwatchLines(uint64_t watch_id) {
  if (options_.events) options_.events->RemoveWatcher(watch_id);
}

}  // namespace sandfence
