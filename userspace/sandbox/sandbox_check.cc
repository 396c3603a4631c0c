// The refusals a sandbox's start makes before anything exists: the dry run
// of Start (Sandbox::Check).
#include "sandbox/sandbox.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "guard/guard_record.h"
#include "sandbox/sandbox_internal.h"

namespace sandfence {

using sandbox_internal::DnsUpstreams;
using sandbox_internal::PhaseNames;

absl::StatusOr<SandboxCheck> Sandbox::Check(HostEnforcement* host,
                                            const SandboxSpec& spec) {
  const CompiledPolicy& policy = spec.policy;
  if (policy.phases.empty()) {
    return Malformed("the policy set has no phase");
  }
  SandboxCheck out;
  const std::string initial = spec.initial_phase.empty()
                                  ? policy.phases.front().name
                                  : spec.initial_phase;
  out.phase_index = -1;
  for (size_t i = 0; i < policy.phases.size(); ++i) {
    if (policy.phases[i].name == initial) out.phase_index = static_cast<int>(i);
  }
  if (out.phase_index < 0) {
    const std::string reason = absl::StrCat(
        "is not a phase of the policy set (", PhaseNames(policy), ")");
    return WithSubject(
        Malformed(absl::StrCat("initial_phase \"", Echo(initial), "\" ",
                               reason)),
        {"", "initial_phase", initial, reason});
  }
  const CompiledPhase& phase = policy.phases[out.phase_index];
  // Every phase, before anything exists: a switch must not find the host
  // unable to enforce what the rollout was promised.
  if (const std::string why = host->UnixUnavailable(); !why.empty()) {
    for (const CompiledPhase& p : policy.phases) {
      if (p.restricted() && p.unix_checked) {
        const std::string reason = absl::StrCat(
            "checks Unix sockets, but ", why,
            "; give it unix { mode: UNCHECKED } (--unix unchecked) to run "
            "with Unix sockets unjudged (the record says so)");
        return WithSubject(
            Rejected(absl::StrCat("phase \"", p.name, "\" ", reason)),
            {p.name, "unix.mode", "CHECKED", reason});
      }
    }
  }
  absl::StatusOr<std::optional<std::vector<HostPort>>> upstreams =
      DnsUpstreams(policy);
  if (!upstreams.ok()) return upstreams.status();
  if (!spec.borrowed) out.dns_upstreams = *std::move(upstreams);
  const bool own_netns_unknown = spec.own_netns && spec.netns_fd < 0;
  // on_switch: CUT_REQUIRED: a sandbox whose switches could leave a
  // forbidden connection open is refused before anything exists.
  if (policy.cut_required && !spec.borrowed) {
    std::string why = host->CutUnavailable();
    if (why.empty() && own_netns_unknown) {
      why =
          "the sandbox has its own network namespace, and which one is not "
          "known (give it, e.g. netns_path)";
    }
    if (!why.empty()) {
      const std::string reason = absl::StrCat(
          "connections cannot be cut at its phase switches here: ", why);
      return WithSubject(
          Rejected(absl::StrCat("policy \"", policy.name,
                                "\" says on_switch: CUT_REQUIRED, but ",
                                reason)),
          {"", "on_switch", "CUT_REQUIRED", reason});
    }
  }
  if (out.dns_upstreams && own_netns_unknown) {
    // Its queries go to its own loopback: a filter in the host's
    // namespace would never see them.
    // The message names no field first: all of it is the reason.
    const std::string message =
        "a DNS-filtered phase cannot be served to this sandbox: it has its "
        "own network namespace, and which one is not known (give it, e.g. "
        "netns_path, or use dns { mode: SYSTEM }, LISTED or NONE)";
    return WithSubject(Rejected(message), {"", "netns_path", "", message});
  }

  // The guard: a mode the host cannot have is a refusal before anything
  // exists.
  out.guard_mode = spec.borrowed
                       ? GuardMode::kOff
                       : spec.guard_mode.value_or(GuardModeFromPolicy(phase.guard));
  if (!spec.borrowed) {
    absl::StatusOr<GuardInfo> guard =
        host->PrepareGuard(out.guard_mode, spec.spawns);
    if (!guard.ok()) {
      return WithSubject(
          absl::Status(guard.status().code(),
                       absl::StrCat("phase \"", phase.name,
                                    "\": ", guard.status().message())),
          {phase.name, "guard.mode",
           std::string(GuardModeName(out.guard_mode)),
           std::string(guard.status().message())});
    }
    out.guard = *guard;
    out.guard_text = GuardEnforcementText(out.guard, out.guard_mode, policy);
  } else {
    out.guard_text = spec.borrowed_guard_text;
  }
  return out;
}

}  // namespace sandfence
