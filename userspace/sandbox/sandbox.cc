// A sandbox's life: Start, Adopt, End, Release (sandbox/sandbox.h).
#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "guard/guard_record.h"
#include "sandbox/sandbox_internal.h"

namespace sandfence {

using sandbox_internal::BpfGuardMode;
using sandbox_internal::DnsUpstreams;

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Start(HostEnforcement* host,
                                                        SandboxSpec spec) {
  // Every refusal before anything exists.
  absl::StatusOr<SandboxCheck> checked = Check(host, spec);
  if (!checked.ok()) return checked.status();
  std::unique_ptr<Sandbox> sb(new Sandbox(host, spec.rollout_id));
  sb->policy_ = std::move(spec.policy);
  sb->borrowed_ = spec.borrowed;
  const int index = checked->phase_index;
  const CompiledPhase& phase = sb->policy_.phases[index];
  sb->dns_upstreams_ = std::move(checked->dns_upstreams);
  // Kept for the switches' cut (the DNS filter gets it at ServeDns). One
  // that cannot be kept is one the cut does not know: it says so (and
  // Check refused it where the policy requires the cut).
  if (spec.own_netns && spec.netns_fd >= 0) {
    sb->netns_ = UniqueFd(::fcntl(spec.netns_fd, F_DUPFD_CLOEXEC, 0));
  }
  sb->own_netns_unknown_ = spec.own_netns && !sb->netns_;
  sb->guard_mode_ = checked->guard_mode;
  sb->guard_ = checked->guard;
  sb->guard_text_ = std::move(checked->guard_text);
  sb->mono_to_unix_ns_ = MonotonicToUnixOffsetNs();
  sb->events_ = std::make_shared<SandboxEvents>(
      sb->borrowed_ ? nullptr : spec.events, sb->rollout_id_);

  // The cgroup.
  absl::StatusOr<CgroupRef> cgroup = spec.create_cgroup
                                         ? host->CreateCgroup(spec.cgroup_path)
                                         : host->OpenCgroup(spec.cgroup_path);
  if (!cgroup.ok()) return cgroup.status();
  sb->cgroup_ = *cgroup;
  sb->created_ = spec.create_cgroup;
  // From here on, a failure undoes what exists.
  struct Undo {
    Sandbox* sb;
    bool armed = true;
    ~Undo() {
      if (!armed) return;
      HostEnforcement* h = sb->host_;
      const uint64_t id = sb->cgroup_.id;
      absl::MutexLock lock(&sb->mu_);
      if (sb->guarded_) h->RemoveGuard(id).IgnoreError();
      if (sb->dns_served_) h->StopDns(id);
      if (sb->attached_) h->DetachEgress(id).IgnoreError();
      if (sb->routed_) h->events().Unroute(id);
      if (sb->created_) h->KillCgroup(id).IgnoreError();
      h->ReleaseCgroup(id, sb->created_).IgnoreError();
      if (sb->recorder_) {
        sb->recorder_->Finalize({}).IgnoreError();
        ::unlink(sb->recorder_->path().c_str());
      }
      sb->done_ = true;
    }
  } undo{sb.get()};

  // The record, then the kernel (records/recorder.h: the span starts
  // before the kernel switches).
  if (absl::Status s = sb->OpenRecord(spec.record_path, spec.record_options,
                                      /*overwrite=*/false);
      !s.ok()) {
    return s;
  }
  if (sb->recorder_) {
    if (absl::Status s = sb->recorder_->BeginPhase(phase.name); !s.ok()) {
      return s;
    }
    sb->recorder_->SetGuardEnforcement(sb->guard_text_);
  }
  absl::MutexLock lock(&sb->mu_);
  sb->phase_index_ = index;
  if (!sb->borrowed_) {
    // Routed before the kernel can report anything for it.
    host->events().Route(sb->cgroup_.id, sb.get());
    sb->routed_ = true;
    absl::StatusOr<uint32_t> generation = host->AttachEgress(
        sb->cgroup_.id, phase, static_cast<uint16_t>(index));
    if (!generation.ok()) {
      if (absl::IsAlreadyExists(generation.status())) {
        return Rejected(absl::StrCat("sandbox ", sb->cgroup_.path,
                                     " is already enforced by sandfence"));
      }
      return generation.status();
    }
    sb->attached_ = true;
    sb->generation_ = *generation;
    // Its own paths are known by the host's bind tracker until a
    // supervisor brokers them (a driver that does says so next).
    bool checks_unix = false;
    for (const CompiledPhase& p : sb->policy_.phases) {
      checks_unix |= p.restricted() && p.unix_checked;
    }
    if (checks_unix) {
      if (absl::Status s = host->SetUnixTraits(sb->cgroup_.id,
                                               {.tracked = true});
          !s.ok()) {
        return s;
      }
    }
    if (sb->recorder_) sb->recorder_->BindGeneration(*generation);
    // Its filter target, before anything runs in it: a filtered phase's
    // queries go nowhere else.
    if (sb->dns_upstreams_) {
      if (absl::Status s = sb->ServeDns(spec.netns_fd); !s.ok()) return s;
    }
    if (const std::optional<GuardMode> bpf = BpfGuardMode(sb->guard_)) {
      if (absl::Status s = host->AddGuard(sb->cgroup_, *bpf); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("process guard: ", s.message()));
      }
      sb->guarded_ = true;
    }
  }
  undo.armed = false;
  sb->events_->PhaseApplied("", phase.name, sb->generation_);
  return sb;
}

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Adopt(HostEnforcement* host,
                                                        SandboxAdoptSpec spec) {
  std::unique_ptr<Sandbox> sb(new Sandbox(host, spec.rollout_id));
  sb->policy_ = std::move(spec.policy);
  sb->borrowed_ = spec.borrowed;
  sb->created_ = spec.created;
  sb->guard_mode_ = spec.borrowed ? GuardMode::kOff : spec.guard_mode;
  sb->mono_to_unix_ns_ = MonotonicToUnixOffsetNs();
  sb->events_ = std::make_shared<SandboxEvents>(
      spec.borrowed ? nullptr : spec.events, sb->rollout_id_);
  if (sb->policy_.phases.empty()) return Malformed("the policy has no phase");

  // The cgroup, if it is still there (a rollout whose sandbox is gone is
  // adopted all the same, so that its record can be finished).
  absl::StatusOr<CgroupRef> cgroup = host->OpenCgroup(spec.cgroup_path);
  if (cgroup.ok() && cgroup->id == spec.cgroup_id) {
    sb->cgroup_ = *cgroup;
  } else {
    if (cgroup.ok()) host->ReleaseCgroup(cgroup->id, false).IgnoreError();
    sb->cgroup_.path = spec.cgroup_path;
    sb->cgroup_.id = spec.cgroup_id;
    sb->adoption_warnings_.push_back(
        absl::StrCat("the sandbox cgroup ", spec.cgroup_path,
                     " was gone (or replaced) when the rollout was adopted"));
  }
  const bool cgroup_held = cgroup.ok() && cgroup->id == spec.cgroup_id;

  int index = sb->PhaseIndex(spec.believed_phase);
  uint32_t generation = 0;
  bool attached = false;
  if (!sb->borrowed_) {
    absl::StatusOr<AdoptedSandbox> adopted = host->AdoptEgress(spec.cgroup_id);
    if (adopted.ok()) {
      attached = true;
      generation = adopted->kernel.generation;
      const int kernel_index = adopted->kernel.phase;
      if (kernel_index < static_cast<int>(sb->policy_.phases.size())) {
        // The kernel's phase is the truth: the predecessor may have died
        // between the switch and saying so.
        if (kernel_index != index && index >= 0) {
          sb->adoption_warnings_.push_back(absl::StrCat(
              "the previous sandfence process believed phase \"",
              spec.believed_phase, "\"; the kernel enforced phase \"",
              sb->policy_.phases[kernel_index].name,
              "\" (a switch was cut short by its death)"));
        }
        index = kernel_index;
      } else {
        sb->adoption_warnings_.push_back(absl::StrCat(
            "the kernel's phase index ", kernel_index,
            " is not a phase of the policy"));
      }
      if (!adopted->missing_hooks.empty()) {
        // Its hooks were removed: what ran in it ran unenforced. A created
        // sandbox's processes die; the hooks are attached afresh.
        sb->adoption_warnings_.push_back(absl::StrCat(
            "the sandbox's ", absl::StrJoin(adopted->missing_hooks, ", "),
            " hooks were gone (unpinned) when it was adopted: it was not "
            "enforced; ",
            sb->created_ ? "its processes were killed and it was attached again"
                         : "it was attached again"));
        if (sb->created_ && cgroup_held) host->KillCgroup(spec.cgroup_id).IgnoreError();
        host->DetachEgress(spec.cgroup_id).IgnoreError();
        attached = false;
      }
    } else if (!absl::IsNotFound(adopted.status())) {
      return adopted.status();
    } else {
      sb->adoption_warnings_.push_back(
          "the kernel held no egress entry for the sandbox when it was "
          "adopted: it was not enforced");
      if (sb->created_ && cgroup_held) host->KillCgroup(spec.cgroup_id).IgnoreError();
    }
    if (index < 0) index = 0;
    if (!attached && cgroup_held) {
      absl::StatusOr<uint32_t> g = host->AttachEgress(
          spec.cgroup_id, sb->policy_.phases[index],
          static_cast<uint16_t>(index));
      if (!g.ok()) return g.status();
      generation = *g;
      attached = true;
    }
  } else if (index < 0) {
    index = 0;
  }

  // The guard: take it over, or guard the sandbox again.
  if (!sb->borrowed_ && sb->guard_mode_ != GuardMode::kOff) {
    absl::StatusOr<GuardInfo> info =
        host->PrepareGuard(sb->guard_mode_, /*spawns=*/false);
    if (info.ok()) {
      sb->guard_ = *info;
      const std::optional<GuardMode> bpf = BpfGuardMode(sb->guard_);
      // Landlock lives in the sandbox's processes: nothing to take over.
      absl::Status taken =
          bpf ? host->AdoptGuard(spec.cgroup_id) : absl::OkStatus();
      if (!taken.ok() && cgroup_held) {
        sb->adoption_warnings_.push_back(absl::StrCat(
            "the process guard did not govern the sandbox when it was "
            "adopted (", taken.message(), "); it was guarded again"));
        taken = host->AddGuard(sb->cgroup_, *bpf);
      }
      if (taken.ok()) {
        absl::MutexLock lock(&sb->mu_);
        sb->guarded_ = true;
      }
    }
    sb->guard_text_ = sb->guarded_
                          ? GuardEnforcementText(sb->guard_, sb->guard_mode_,
                                                 sb->policy_)
                          : absl::StrCat("off (could not be restored after "
                                         "the sandfence process died)");
  } else {
    sb->guard_text_ = sb->borrowed_ ? spec.borrowed_guard_text
                                    : std::string(EnforcerName(Enforcer::kOff));
  }

  if (absl::Status s = sb->OpenRecord(spec.record_path, spec.record_options,
                                      /*overwrite=*/true);
      !s.ok()) {
    return s;
  }
  if (sb->recorder_) {
    sb->recorder_->BeginPhase(sb->policy_.phases[index].name).IgnoreError();
    if (attached) sb->recorder_->BindGeneration(generation);
    sb->recorder_->SetGuardEnforcement(sb->guard_text_);
  }
  sb->events_->PhaseApplied("", sb->policy_.phases[index].name, generation);
  absl::MutexLock lock(&sb->mu_);
  sb->phase_index_ = index;
  sb->generation_ = generation;
  sb->attached_ = attached;
  if (!sb->borrowed_) {
    host->events().Route(sb->cgroup_.id, sb.get());
    sb->routed_ = true;
  }
  // The dead process's filter went with it: serve the sandbox again, on a
  // target of this process (the kernel's entry is rewritten to it). Until
  // now its queries found no filter and failed.
  absl::StatusOr<std::optional<std::vector<HostPort>>> upstreams =
      DnsUpstreams(sb->policy_);
  if (attached && upstreams.ok() && *upstreams) {
    sb->dns_upstreams_ = *std::move(upstreams);
    // A sandbox with its own network namespace is served in the host's
    // here (its successor does not know the namespace): its queries then
    // find no filter and fail, closed.
    if (absl::Status s = sb->ServeDns(/*netns_fd=*/-1); !s.ok()) {
      sb->adoption_warnings_.push_back(absl::StrCat(
          "the sandbox's DNS filter could not be served again after "
          "adoption (", s.message(), "): its queries fail"));
    }
  }
  return sb;
}

Sandbox::~Sandbox() {
  bool done;
  {
    absl::MutexLock lock(&mu_);
    done = done_;
  }
  if (!done) Release();
}

std::string Sandbox::phase() const {
  absl::MutexLock lock(&mu_);
  return policy_.phases[phase_index_].name;
}

const CompiledPhase& Sandbox::current_phase() const {
  absl::MutexLock lock(&mu_);
  // The phases never change after Start; only the index moves.
  return policy_.phases[phase_index_];
}

uint32_t Sandbox::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

absl::StatusOr<SandboxCounters> Sandbox::Counters() const {
  if (borrowed_) return SandboxCounters{};
  return host_->EgressCounters(cgroup_.id);
}

absl::StatusOr<SandboxEnd> Sandbox::End() {
  absl::MutexLock lock(&mu_);
  if (done_) return absl::FailedPreconditionError("the sandbox has ended");
  done_ = true;
  SandboxEnd out;
  const uint64_t id = cgroup_.id;
  // Its processes die before the hooks come off: nothing in the sandbox
  // ever runs unenforced.
  bool survivors = false;
  if (created_) {
    absl::Status killed = host_->KillCgroup(id);
    // A cgroup that is gone holds no process: nothing survived.
    survivors = !killed.ok() && !absl::IsNotFound(killed);
    if (survivors) out.cleanup.Update(killed);
  }
  // What the kernel queued for it reaches its record.
  if (routed_) host_->DrainEvents().IgnoreError();
  if (survivors) {
    // What could not be killed stays enforced (pinned), for a reaper to
    // kill later; the record is finished with what the kernel counted.
    if (attached_) {
      absl::StatusOr<SandboxCounters> counters = host_->EgressCounters(id);
      if (counters.ok()) {
        out.counters = *counters;
        out.counters_read = true;
      }
    }
    if (guarded_) {
      absl::StatusOr<uint64_t> lost = host_->GuardEventsLost(id);
      if (lost.ok()) out.guard_events_lost = *lost;
    }
    attached_ = guarded_ = false;
  }
  if (dns_served_) {
    host_->StopDns(id);
    dns_served_ = false;
  }
  if (guarded_) {
    absl::StatusOr<uint64_t> lost = host_->RemoveGuard(id);
    if (lost.ok()) out.guard_events_lost = *lost;
    guarded_ = false;
  }
  if (attached_) {
    absl::StatusOr<SandboxCounters> counters = host_->DetachEgress(id);
    if (counters.ok()) {
      out.counters = *counters;
      out.counters_read = true;
    }
    attached_ = false;
  } else if (borrowed_) {
    out.counters_read = true;  // nothing attached, nothing counted
  }
  if (routed_) {
    out.hub = host_->events().Unroute(id);
    routed_ = false;
  }
  out.cleanup.Update(host_->ReleaseCgroup(id, created_ && !survivors));
  if (recorder_) {
    FinalCounts counts;
    if (out.counters_read) counts.kernel = out.counters;
    counts.decode_errors = out.hub.net_decode_errors;
    counts.unrouted_events = out.hub.net_unrouted;
    counts.guard_events_lost = out.guard_events_lost;
    counts.guard_decode_errors = out.hub.guard_decode_errors;
    absl::StatusOr<RecordOutcome> outcome = recorder_->Finalize(counts);
    if (!outcome.ok()) return outcome.status();
    out.record = *std::move(outcome);
  }
  // Every loss a collector should know of, by name (the record holds the
  // balance); an empty list when nothing was lost.
  std::vector<std::pair<std::string, uint64_t>> losses;
  const auto lost = [&](const char* name, uint64_t n) {
    if (n > 0) losses.emplace_back(name, n);
  };
  lost("kernel_events_lost", out.counters.events_lost);
  lost("guard_events_lost", out.guard_events_lost);
  lost("decode_errors", out.hub.net_decode_errors);
  lost("guard_decode_errors", out.hub.guard_decode_errors);
  if (out.record) lost("reader_dropped", out.record->loss.reader_dropped());
  if (!out.counters_read) lost("kernel_counters_unread", 1);
  events_->Ended(policy_.phases[phase_index_].name, std::move(losses));
  return out;
}

std::string Sandbox::CgroupGoneReason() const {
  return host_->CgroupGone(cgroup_);
}

void Sandbox::NoteGone(std::string why) {
  absl::MutexLock lock(&mu_);
  created_ = false;
  if (recorder_) {
    recorder_->AddWarning(v1::WARNING_SANDBOX_GONE, std::move(why));
  }
}

void Sandbox::Release() {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  done_ = true;
  if (routed_) host_->events().Unroute(cgroup_.id);
  routed_ = false;
  // A successor serves it again on adoption; until then its queries reach
  // no filter and fail (closed).
  if (dns_served_) host_->StopDns(cgroup_.id);
  dns_served_ = false;
  host_->ReleaseCgroup(cgroup_.id, /*remove=*/false).IgnoreError();
  if (recorder_) recorder_->Tick().IgnoreError();
}

}  // namespace sandfence
