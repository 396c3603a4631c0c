// The Unix socket enforcers' host-wide programs (the bind tracker, the LSM
// hooks), a sandbox's Unix traits, and the supervisor's brokered connects.
#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/controller_internal.h"
#include "egress/egress_rules.h"
#include "host/bpf_object.h"

namespace sandfence {

absl::Status EgressController::AttachUnixHostProgs() {
  // One link per program and host on a pinned host (pinned, so that it runs
  // while any sandbox may need it, whichever process attached it); one per
  // controller otherwise. A pinned link of an earlier build stays: it
  // shares these maps (libbpf refused the load if their layout changed).
  for (const char* prog : UnixHostProgs()) {
    // The bind tracker only while a sandbox needs it (UpdateBindTracker).
    if (absl::string_view(prog) == kUnixBindProg) continue;
    absl::StatusOr<UniqueFd> link = AttachHostProg(prog);
    if (!link.ok()) return link.status();
    unix_host_links_.push_back(*std::move(link));
  }
  return UpdateBindTracker();
}

absl::StatusOr<UniqueFd> EgressController::AttachHostProg(const char* prog) {
  const std::string pin = host_->pins().HostLink(prog);
  if (host_->pinned()) {
    UniqueFd existing(bpf_obj_get(pin.c_str()));
    if (existing) return existing;
  }
  // Tracing and LSM programs alike attach through raw_tracepoint_open.
  UniqueFd link(bpf_raw_tracepoint_open(nullptr, prog_fd(prog)));
  if (!link) {
    return BpfLoadError(errno,
                     absl::StrCat("attach the unix socket program ", prog,
                                  " (", unix_enforcer_name(), ")"));
  }
  if (host_->pinned()) {
    if (absl::Status s = MakeDirs(host_->pins().HostLinksDir()); !s.ok()) {
      return s;
    }
    if (bpf_obj_pin(link.get(), pin.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("pin ", pin));
    }
  }
  return link;
}

bool EgressController::BindTrackerNeeded() const {
  for (const KernelSandbox& k : KernelSandboxes()) {
    if (ReliesOnBindTracker(k.flags)) return true;
  }
  return false;
}

bool EgressController::holds_unix_bind_tracker() const {
  absl::MutexLock lock(&tracker_mu_);
  return static_cast<bool>(bind_tracker_link_);
}

absl::Status EgressController::UpdateBindTracker(bool attach) {
  if (!unix_bind_tracker_ || unix_enforcer_ != UnixEnforcer::kCgroupHooks) {
    return absl::OkStatus();
  }
  // The host's sandboxes decide, whichever process owns them: one process
  // at a time attaches or detaches (a driver without the tracker never
  // does).
  HostState::Lock host_lock = host_->Exclusive();
  absl::MutexLock lock(&tracker_mu_);
  const std::string pin = host_->pins().HostLink(kUnixBindProg);
  if (attach || BindTrackerNeeded()) {
    if (bind_tracker_link_) {
      // Pinned again if another process took the pin away: the next
      // process must find it.
      struct stat st {};
      if (host_->pinned() && ::stat(pin.c_str(), &st) != 0 &&
          bpf_obj_pin(bind_tracker_link_.get(), pin.c_str()) != 0) {
        return ErrnoError(errno, absl::StrCat("pin ", pin));
      }
      return absl::OkStatus();
    }
    absl::StatusOr<UniqueFd> link = AttachHostProg(kUnixBindProg);
    if (!link.ok()) return link.status();
    bind_tracker_link_ = *std::move(link);
    return absl::OkStatus();
  }
  // Nobody needs it: nothing taxes the host's system calls for nobody.
  if (host_->pinned()) ::unlink(pin.c_str());
  bind_tracker_link_.reset();
  return absl::OkStatus();
}

void EgressController::DetachHostProgs() {
  for (const char* prog : UnixHostProgs()) {
    if (!unix_bind_tracker_ && absl::string_view(prog) == kUnixBindProg) {
      continue;
    }
    if (host_->pinned()) ::unlink(host_->pins().HostLink(prog).c_str());
  }
  unix_host_links_.clear();
  absl::MutexLock lock(&tracker_mu_);
  bind_tracker_link_.reset();
}

absl::Status EgressController::CheckUnix(const CompiledPhase& phase) const {
  if (!phase.restricted() || !phase.unix_checked || unix_checks()) {
    return absl::OkStatus();
  }
  return Rejected(absl::StrCat(
      "phase \"", phase.name, "\" checks Unix sockets, but ", unix_unavailable_,
      "; give the phase unix { mode: UNCHECKED } to run it with Unix "
      "sockets unjudged (the record says so)"));
}

absl::Status EgressController::ProtectUnixName(const UnixName& name) {
  if (!unix_checks()) return absl::OkStatus();  // nothing judges names here
  const sf_unix_key key = UnixKey(name, 0);
  const uint8_t one = 1;
  if (bpf_map_update_elem(maps_.unix_protected.get(), &key, &one, BPF_ANY) !=
      0) {
    return MapWriteError(errno, "sf_unix_protected");
  }
  return absl::OkStatus();
}

absl::Status EgressController::SetUnixTraits(uint64_t cgroup_id,
                                             const UnixTraits& traits) {
  // Only the cgroup hooks read them; the LSM hooks judge the socket reached.
  if (unix_enforcer_ != UnixEnforcer::kCgroupHooks) return absl::OkStatus();
  const bool tracked = traits.tracked && !traits.broker && unix_bind_tracker_;
  // The tracker first: a sandbox's binds are tracked before its entry says
  // it relies on them.
  if (tracked) {
    if (absl::Status s = UpdateBindTracker(/*attach=*/true); !s.ok()) {
      return s;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<SandboxState*> found = Find(cgroup_id);
    if (!found.ok()) return found.status();
    SandboxState& state = **found;
    const uint32_t traits_before = state.unix_traits;
    state.unix_traits = (traits.broker ? SF_SB_UNIX_BROKER : 0u) |
                        (traits.abstract_scoped ? SF_SB_UNIX_SCOPED : 0u) |
                        (tracked ? SF_SB_UNIX_TRACKED : 0u);
    const uint32_t flags =
        WithUnixTraits(state.flags & ~kUnixTraitFlags, state.unix_traits);
    if (flags != state.flags) {
      const uint32_t before = state.flags;
      state.flags = flags;
      if (absl::Status s = WriteSandbox(cgroup_id, state, BPF_EXIST);
          !s.ok()) {
        state.flags = before;
        state.unix_traits = traits_before;
        return s;
      }
    }
  }
  return UpdateBindTracker();
}

absl::Status EgressController::AllowBrokeredConnect(uint64_t cookie,
                                                    uint64_t pid_tgid) {
  if (!maps_.unix_brokered) {
    return absl::FailedPreconditionError(
        "no cgroup Unix hooks here: nothing to broker");
  }
  if (bpf_map_update_elem(maps_.unix_brokered.get(), &cookie, &pid_tgid,
                          BPF_ANY) != 0) {
    return MapWriteError(errno, "sf_unix_brokered");
  }
  return absl::OkStatus();
}

void EgressController::ForgetBrokeredConnect(uint64_t cookie) {
  if (maps_.unix_brokered) {
    bpf_map_delete_elem(maps_.unix_brokered.get(), &cookie);
  }
}

}  // namespace sandfence
