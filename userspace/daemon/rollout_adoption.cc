#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "daemon/log.h"
#include "daemon/rollout_manager.h"
#include "egress/egress_abi.h"
#include "guard/guard_record.h"
#include "policy/policy_source.h"
#include "policy/rollout_endpoints.h"
#include "records/journal.h"
#include "records/merged_record.h"
#include "resolve/resolver.h"
#include "sandbox/kernel_enforcement.h"
#include "sandbox/reaper.h"

#include "daemon/rollout_internal.h"

namespace sandfence {

using rollout_internal::NowUnixNs;
using rollout_internal::PolicyFromState;

void RolloutManager::EventLoop() {
  int64_t last_reap = NowUnixNs();
  int64_t last_gone_check = 0;  // at once: adopted rollouts may be gone
  while (!stop_) {
    absl::StatusOr<int> n = enforcement_->PollEvents(20);
    if (!n.ok()) LogError("event reader: %s", StatusText(n.status()));
    std::vector<std::shared_ptr<Rollout>> open;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, r] : rollouts_) open.push_back(r);
    }
    for (const std::shared_ptr<Rollout>& r : open) {
      // Never wait for a rollout's call: its next tick will do.
      if (!r->mu.TryLock()) continue;
      if (r->open() && r->sandbox->recorder() != nullptr) {
        r->sandbox->recorder()->Tick().IgnoreError();  // errors stick
      }
      r->mu.Unlock();
    }
    if (options_.reap_interval_ms > 0 &&
        NowUnixNs() - last_reap >=
            static_cast<int64_t>(options_.reap_interval_ms) * 1000000) {
      last_reap = NowUnixNs();
      ReapRuns();
    }
    if (options_.gone_check_ms > 0 &&
        NowUnixNs() - last_gone_check >=
            static_cast<int64_t>(options_.gone_check_ms) * 1000000) {
      last_gone_check = NowUnixNs();
      ReclaimGone();
    }
  }
}

void RolloutManager::ReclaimGone() {
  std::vector<std::shared_ptr<Rollout>> open;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, r] : rollouts_) open.push_back(r);
  }
  for (const std::shared_ptr<Rollout>& r : open) {
    std::string id;
    {
      // A rollout busy with a call is looked at on the next pass.
      if (!r->mu.TryLock()) continue;
      std::string why;
      if (r->open()) why = r->sandbox->CgroupGoneReason();
      if (!why.empty()) {
        id = r->state.request().rollout_id();
        r->sandbox->NoteGone(absl::StrCat(
            why, ": the daemon ended the rollout without EndRollout"));
      }
      r->mu.Unlock();
    }
    if (id.empty()) continue;
    absl::StatusOr<v1::EndRolloutResponse> ended = End(id);
    if (ended.ok()) {
      ++gone_;
      LogWarning("rollout %s: its sandbox cgroup is gone; ended it (record %s)",
                 id, ended->record_path());
    } else if (!absl::IsNotFound(ended.status())) {
      LogError("rollout %s: its sandbox cgroup is gone; ending it: %s", id,
               StatusText(ended.status()));
    }
  }
}

void RolloutManager::ReapRuns() {
  ReapReport report = ReapDeadRuns(*enforcement_);
  reaped_ += report.reaped.size();
  for (uint64_t id : report.reaped) {
    LogInfo("ended cgroup %d: its sandfence run died", id);
  }
  for (const std::string& e : report.errors) {
    LogError("could not end the sandbox of a dead sandfence run: %s", e);
  }
}

std::vector<std::string> RolloutManager::AdoptAndStart() {
  std::vector<std::string> adopted;
  ReapRuns();
  for (StateStore::Loaded& loaded : store_->LoadAll()) {
    if (!loaded.state.ok()) {
      LogError(
          "cannot read rollout state %s (%s); its sandbox stays enforced "
          "(sandfence daemon --cleanup removes it)",
          loaded.path, StatusText(loaded.state.status()));
      continue;
    }
    const std::string id = loaded.state->request().rollout_id();
    if (absl::Status s = Adopt(*std::move(loaded.state)); !s.ok()) {
      LogError("cannot adopt rollout %s: %s; its sandbox stays enforced", id,
               StatusText(s));
      continue;
    }
    ++adopted_;
    adopted.push_back(id);
    LogInfo("adopted rollout %s", id);
  }
  // Sandboxes of dead daemons that no state names (a daemon that died
  // between attaching and saving, or whose state file was removed): kept
  // enforced under this daemon, and said.
  for (const OrphanSandbox& o : enforcement_->Orphans()) {
    if (o.owner.kind != DriverKind::kDaemon) continue;
    bool owned;
    {
      absl::MutexLock lock(&mu_);
      owned = owner_of_.contains(o.egress.cgroup_id);
    }
    if (!owned) AdoptUnowned(o);
  }
  // What the kernel queued for them while no daemon read it reaches their
  // records, then the dead daemons' slots are free.
  for (const DeadDriver& d : enforcement_->DeadDrivers()) {
    if (d.kind != DriverKind::kDaemon) continue;
    if (absl::Status s = enforcement_->RecoverEvents(d); !s.ok()) {
      LogWarning("events queued for a dead daemon's sandboxes: %s",
                 StatusText(s));
    }
    enforcement_->ForgetDeadDriver(d);
  }
  event_thread_ = std::thread([this] { EventLoop(); });
  return adopted;
}

void RolloutManager::AdoptUnowned(const OrphanSandbox& o) {
  const uint64_t id = o.egress.cgroup_id;
  if (absl::IsNotFound(enforcement_->CgroupPath(id).status())) {
    // Its cgroup is gone: nothing can run there any more, and no state
    // names a record to finish. Everything it holds is freed.
    absl::Status s;
    if (o.guarded) s.Update(enforcement_->RemoveGuard(id).status());
    absl::StatusOr<AdoptedSandbox> adopted = enforcement_->AdoptEgress(id);
    if (adopted.ok()) {
      s.Update(enforcement_->DetachEgress(id).status());
    } else if (!absl::IsNotFound(adopted.status())) {
      s.Update(adopted.status());
    }
    if (s.ok()) {
      ++gone_;
      LogWarning("cgroup %d of a dead daemon is gone and no rollout names it: "
                 "its hooks, rules and guard entry were freed",
                 id);
    } else {
      LogError("cgroup %d of a dead daemon is gone; freeing it: %s", id,
               StatusText(s));
    }
    return;
  }
  absl::StatusOr<AdoptedSandbox> taken =
      enforcement_->AdoptEgress(o.egress.cgroup_id);
  if (!taken.ok()) {
    LogError("cgroup %d of a dead daemon: %s", o.egress.cgroup_id,
             StatusText(taken.status()));
    return;
  }
  if (o.guarded) enforcement_->AdoptGuard(o.egress.cgroup_id).IgnoreError();
  LogWarning(
      "cgroup %d is enforced by sandfence but belongs to no rollout of this "
      "daemon (its state is gone); it stays enforced; sandfence daemon "
      "--cleanup removes it",
      o.egress.cgroup_id);
}

absl::Status RolloutManager::Adopt(v1::RolloutState state) {
  const std::string id = state.request().rollout_id();
  if (absl::Status s = ValidateRolloutId(id); !s.ok()) return s;
  auto r = std::make_shared<Rollout>();
  r->request_bytes = DeterministicBytes(state.request());
  absl::StatusOr<CompiledPolicy> policy = PolicyFromState(state);
  if (!policy.ok()) return policy.status();
  absl::StatusOr<GuardMode> mode =
      ParseGuardMode(state.guard_mode().empty() ? "auto" : state.guard_mode());

  SandboxAdoptSpec spec;
  spec.rollout_id = id;
  spec.cgroup_path = state.response().cgroup_path();
  spec.cgroup_id = state.response().cgroup_id();
  spec.created = state.created_cgroup();
  spec.borrowed =
      !state.response().borrowed_from().empty() || state.request().borrowed();
  spec.borrowed_guard_text = absl::StrCat(
      "not reported (the guard of rollout \"", state.response().borrowed_from(),
      "\", which owns the sandbox)");
  spec.policy = *std::move(policy);
  spec.guard_mode = mode.ok() ? *mode : GuardMode::kAuto;
  spec.believed_phase = state.phase();
  spec.record_path = JournalPath(id, state.journal_path_size());
  spec.events = options_.events;
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox =
      Sandbox::Adopt(enforcement_.get(), std::move(spec));
  if (!sandbox.ok()) return sandbox.status();
  Sandbox& sb = **sandbox;
  for (const std::string& w : sb.adoption_warnings()) {
    LogWarning("rollout %s: %s", id, w);
    if (sb.recorder() != nullptr) {
      sb.recorder()->AddWarning(v1::WARNING_ADOPTION, w);
    }
  }
  state.add_journal_path(sb.recorder() != nullptr ? sb.recorder()->path()
                                                  : JournalPath(id, 0));
  *state.add_adopted_time() = UnixNsToTimestamp(NowUnixNs());
  state.set_phase(sb.phase());
  state.mutable_response()->set_generation(sb.generation());
  if (absl::Status s = store_->Save(state); !s.ok()) {
    LogWarning("rollout %s: save state: %s", id, StatusText(s));
  }
  CountDecisions(sb);
  r->state = std::move(state);
  r->sandbox = *std::move(sandbox);
  r->started = true;
  r->adopted = true;
  absl::MutexLock lock(&mu_);
  if (!r->sandbox->borrowed()) owner_of_[r->cgroup_id()] = id;
  Publish(*r);
  rollouts_.emplace(id, std::move(r));
  return absl::OkStatus();
}

absl::Status RolloutManager::Cleanup(const ManagerOptions& options) {
  // Never from under a running daemon.
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::OpenForCleanup(options.state_dir);
  if (!store.ok()) return store.status();
  KernelEnforcementOptions kopts;
  kopts.host.pin_root = options.pin_dir;
  kopts.host.kind = DriverKind::kDaemon;
  absl::StatusOr<std::unique_ptr<KernelEnforcement>> kernel =
      KernelEnforcement::Create(kopts);
  if (!kernel.ok()) return kernel.status();
  HostEnforcement& host = **kernel;
  absl::Status first;
  // Each rollout a daemon left, as at EndRollout: processes of created
  // sandboxes die, then the guard and the hooks come off.
  std::vector<uint64_t> ids;
  std::set<uint64_t> created;
  for (StateStore::Loaded& l : (*store)->LoadAll()) {
    if (!l.state.ok()) continue;
    ids.push_back(l.state->response().cgroup_id());
    if (l.state->created_cgroup()) created.insert(ids.back());
  }
  for (const OrphanSandbox& o : host.Orphans()) {
    if (o.owner.kind == DriverKind::kDaemon) ids.push_back(o.egress.cgroup_id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (uint64_t id : ids) {
    const bool kill = created.contains(id);
    if (kill) host.KillCgroup(id).IgnoreError();
    host.RemoveGuard(id).IgnoreError();
    if (host.AdoptEgress(id).ok()) first.Update(host.DetachEgress(id).status());
    if (kill) first.Update(host.ReleaseCgroup(id, /*remove=*/true));
  }
  (*store)->RemoveAll();
  ReapDeadRuns(host);
  for (const DeadDriver& d : host.DeadDrivers()) {
    if (d.kind == DriverKind::kDaemon) host.ForgetDeadDriver(d);
  }
  // Then the pinned sets: every one that no other process still uses.
  kernel->reset();
  if (!options.pin_dir.empty()) {
    absl::Status pins = RemoveUnusedPins(options.pin_dir);
    if (!pins.ok() && !absl::IsFailedPrecondition(pins)) first.Update(pins);
  }
  return first;
}

}  // namespace sandfence
