// The socket calls of processes entered into rollouts
// (daemon/entry_supervisor.h), answered by each rollout's phase.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "confine/landlock.h"
#include "confine/unix_broker.h"
#include "daemon/log.h"
#include "daemon/rollout_internal.h"
#include "daemon/rollout_manager.h"
#include "sandbox/socket_attempts.h"

namespace sandfence {

absl::Status RolloutManager::ServeSupervision(const std::string& path) {
  if (supervision_) return absl::FailedPreconditionError("already serving");
  EntrySupervisor::Hooks hooks;
  hooks.admit = [this](const std::string& id, pid_t caller) {
    return AdmitEntry(id, caller);
  };
  hooks.admitted = [this](const std::string& id) { EntryAdmitted(id); };
  hooks.answer = [this](const std::string& id, uint64_t home_mount_ns,
                        confine::SocketSupervisor& supervisor) {
    return AnswerEntered(id, home_mount_ns, supervisor);
  };
  absl::StatusOr<std::unique_ptr<EntrySupervisor>> s =
      EntrySupervisor::Listen(path, std::move(hooks));
  if (!s.ok()) return s.status();
  supervision_ = *std::move(s);
  return Protect(path);
}

absl::StatusOr<std::string> RolloutManager::AdmitEntry(
    const std::string& rollout_id, pid_t caller) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  // As every call of the daemon's: a sandboxed process may not hand the
  // daemon its own listener (and switch its rollout's checks so).
  if (caller > 0 && InsideSandbox(caller)) {
    CountRefusedCall();
    return absl::PermissionDeniedError(
        "sandfence refuses calls from inside a sandbox");
  }
  absl::StatusOr<OpenRollout> open = FindOpen(rollout_id);
  if (!open.ok()) return open.status();
  OpenRollout& r = *open;
  // As EnterRollout: a rollout without a guard confines nobody.
  if (r->sandbox->guard_mode() == GuardMode::kOff) {
    return Rejected(
        absl::StrCat("rollout \"", rollout_id, "\" has its process guard off"));
  }
  return r->sandbox->cgroup().path;
}

void RolloutManager::EntryAdmitted(const std::string& rollout_id) {
  absl::StatusOr<OpenRollout> open = FindOpen(rollout_id);
  if (!open.ok()) return;
  Sandbox& sb = *(*open)->sandbox;
  // A cgroup the daemon made (empty, then entered through `enter`, each
  // process confined and supervised): its Unix paths are brokered, and
  // where Landlock scopes abstract sockets (ABI 6+) its abstract names are
  // left to that scope; nobody needs the host's bind tracker for it. An
  // existing cgroup may hold processes nothing confined: it stays as it is
  // (its names by the tracker, its abstract names checked).
  if (sb.created() && enforcement_->CanBrokerUnix()) {
    UnixTraits traits;
    traits.broker = true;
    traits.abstract_scoped = confine::ProbeLandlockAbi().version >= 6;
    if (absl::Status s = enforcement_->SetUnixTraits(sb.cgroup().id, traits);
        !s.ok()) {
      // Still tracked: its own paths stay reachable by name, checked by the
      // tracker as before.
      LogError("rollout %s: broker its Unix paths: %s", rollout_id,
               StatusText(s));
    }
  }
  LogInfo("rollout %s: an entered process's socket calls are supervised",
          rollout_id);
}

absl::Status RolloutManager::AnswerEntered(
    const std::string& rollout_id, uint64_t home_mount_ns,
    confine::SocketSupervisor& supervisor) {
  absl::StatusOr<OpenRollout> open = FindOpen(rollout_id);
  if (!open.ok()) {
    // Ending: refused, as the closed listener will refuse the next one.
    return supervisor.AnswerOne(/*restricted=*/true).status();
  }
  Sandbox& sb = *(*open)->sandbox;
  const CompiledPhase& phase = sb.current_phase();
  const std::optional<sf_verdict> verdict = SocketFamilyVerdict(phase);
  const bool brokered = enforcement_->CanBrokerUnix() &&
                        verdict == SF_VERDICT_DENY && phase.unix_checked;
  HostEnforcement* host = enforcement_.get();
  const confine::UnixBroker broker(confine::UnixBrokerHooks{
      sb.cgroup().path,
      [host](uint64_t cookie, uint64_t pid_tgid) {
        return host->AllowBrokeredConnect(cookie, pid_tgid);
      },
      [host](uint64_t cookie) { host->ForgetBrokeredConnect(cookie); },
      ListedUnixPaths(phase), home_mount_ns});
  absl::StatusOr<std::optional<confine::SocketAttempt>> a =
      supervisor.AnswerOne(verdict == SF_VERDICT_DENY,
                           brokered ? &broker : nullptr,
                           phase.guard_allow_io_uring);
  if (!a.ok()) return a.status();
  if (*a && verdict) {
    sb.AddSupervisedEvent(
        SocketAttemptEvent(**a, *verdict, sb.cgroup().id, sb.generation()));
  }
  return absl::OkStatus();
}

}  // namespace sandfence
