// The sandbox's process guard: which BPF guard its cgroup gets, what the
// record says of it, and what the processes a driver starts apply to
// themselves (Landlock + seccomp).
#include "sandbox/sandbox.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "guard/guard_record.h"
#include "sandbox/sandbox_internal.h"

namespace sandfence {
namespace sandbox_internal {

std::optional<GuardMode> BpfGuardMode(const GuardInfo& guard) {
  switch (guard.enforcer) {
    case Enforcer::kLsm:
      return GuardMode::kLsm;
    case Enforcer::kSignal:
      return GuardMode::kSignal;
    case Enforcer::kOff:
    case Enforcer::kLandlock:
      break;
  }
  return std::nullopt;
}

}  // namespace sandbox_internal

std::string GuardLabel(const GuardInfo& guard) {
  std::string out(EnforcerName(guard.enforcer));
  if (guard.confined && guard.enforcer != Enforcer::kLandlock) {
    absl::StrAppend(&out, "+landlock");
  }
  return out;
}

ConfinePlan ConfinePlanForPhases(const CompiledPolicy& policy,
                                 size_t from_phase,
                                 const std::vector<std::string>& own_paths) {
  ConfinePlan plan;
  plan.no_access = own_paths;
  plan.deny_io_uring = false;
  plan.deny_ptrace = false;
  for (size_t i = from_phase; i < policy.phases.size(); ++i) {
    const CompiledPhase& p = policy.phases[i];
    plan.deny_io_uring = plan.deny_io_uring || !p.guard_allow_io_uring;
    plan.deny_ptrace = plan.deny_ptrace || p.guard_deny_ptrace;
  }
  return plan;
}

void Sandbox::NoteConfinement(
    const std::vector<ConfineGuarantee>& guarantees) {
  std::vector<std::string> layers, gaps;
  for (const ConfineGuarantee& g : guarantees) {
    if (!g.holds) {
      gaps.push_back(absl::StrCat(g.what, " (", g.layer, ")"));
    } else if (std::find(layers.begin(), layers.end(), g.layer) ==
               layers.end()) {
      layers.push_back(g.layer);
    }
  }
  absl::StrAppend(&guard_text_, "; confinement: ", absl::StrJoin(layers, ", "));
  if (!gaps.empty()) {
    absl::StrAppend(&guard_text_, "; not held: ", absl::StrJoin(gaps, "; "));
  }
  if (recorder_) recorder_->SetGuardEnforcement(guard_text_);
}

ConfinePlan Sandbox::ConfinementPlan(
    const std::vector<std::string>& own_paths) const {
  absl::MutexLock lock(&mu_);
  return ConfinePlanForPhases(policy_, static_cast<size_t>(phase_index_),
                              own_paths);
}

std::string GuardEnforcementText(const GuardInfo& guard, GuardMode mode,
                                 const CompiledPolicy& policy) {
  std::vector<std::string> others;
  for (const CompiledPhase& p : policy.phases) {
    const GuardMode asked = GuardModeFromPolicy(p.guard);
    if (asked != mode) {
      others.push_back(absl::StrCat("phase \"", p.name, "\" asks for ",
                                    GuardModeName(asked)));
    }
  }
  std::string out = GuardLabel(guard);
  if (guard.enforcer == Enforcer::kLandlock) {
    absl::StrAppend(&out,
                    guard.confined
                        ? " (Landlock + seccomp on the processes sandfence "
                          "starts, kernel-enforced)"
                        : " (Landlock + seccomp on the processes started "
                          "through `sandfence enter`; nothing else placed in "
                          "the cgroup is guarded)");
  } else if (guard.confined) {
    absl::StrAppend(&out, " (and Landlock + seccomp on the processes "
                          "sandfence starts)");
  }
  if (!guard.fallback_reason.empty() && guard.enforcer != Enforcer::kLsm) {
    absl::StrAppend(&out, "; lsm unavailable: ", guard.fallback_reason);
  }
  if (mode == GuardMode::kSignal && guard.enforcer == Enforcer::kLsm) {
    absl::StrAppend(&out,
                    "; mode signal asked, this host's process guard runs lsm");
  }
  if (!others.empty()) {
    absl::StrAppend(&out, "; mode ", GuardModeName(mode),
                    " fixed at the rollout's start (",
                    absl::StrJoin(others, ", "), ": not applied)");
  }
  return out;
}

}  // namespace sandfence
