// A sandbox's phase switches: the record's next span, the kernel's atomic
// switch, the cut of what the new phase forbids, the DNS filter's names.
#include "sandbox/sandbox.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "sandbox/sandbox_internal.h"

namespace sandfence {
namespace sandbox_internal {

std::string PhaseNames(const CompiledPolicy& policy) {
  std::vector<std::string> names;
  for (const CompiledPhase& p : policy.phases) names.push_back(p.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace sandbox_internal

using sandbox_internal::PhaseNames;

int Sandbox::PhaseIndex(absl::string_view name) const {
  for (size_t i = 0; i < policy_.phases.size(); ++i) {
    if (policy_.phases[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<PhaseChange> Sandbox::SwitchPhase(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  if (done_) return absl::FailedPreconditionError("the sandbox has ended");
  const int index = PhaseIndex(name);
  if (index < 0) {
    return Malformed(absl::StrCat("phase \"", Echo(name),
                                  "\" is not a phase of rollout \"",
                                  rollout_id_, "\" (", PhaseNames(policy_),
                                  ")"));
  }
  PhaseChange out;
  out.previous = policy_.phases[phase_index_].name;
  out.phase = policy_.phases[index].name;
  out.generation = generation_;
  // A retried switch (or a framework that says where it is): no new
  // generation, no new span; only a cut that a CUT_REQUIRED switch still
  // owes is tried again.
  if (index == phase_index_) {
    if (cut_pending_) {
      if (absl::Status s = CutLocked(&out); !s.ok()) return s;
    }
    return out;
  }
  if (recorder_) {
    if (absl::Status s = recorder_->BeginPhase(out.phase); !s.ok()) return s;
  }
  if (attached_) {
    absl::StatusOr<uint32_t> generation = host_->SwitchEgress(
        cgroup_.id, policy_.phases[index], static_cast<uint16_t>(index));
    if (!generation.ok()) {
      // The kernel still enforces the old phase: so does the record.
      if (recorder_ && recorder_->BeginPhase(out.previous).ok()) {
        recorder_->BindGeneration(generation_);
      }
      return absl::Status(generation.status().code(),
                          absl::StrCat("switch to phase ", out.phase, ": ",
                                       generation.status().message()));
    }
    generation_ = *generation;
    if (recorder_) recorder_->BindGeneration(generation_);
  }
  phase_index_ = index;
  out.generation = generation_;
  out.changed = true;
  events_->PhaseApplied(out.previous, out.phase, generation_);
  // New connections were judged by the new phase from the flip on; now the
  // ones it forbids that are already open.
  if (attached_) {
    if (absl::Status s = CutLocked(&out); !s.ok()) {
      SetDnsPhaseLocked().IgnoreError();
      return s;
    }
  }
  // The filter answers for the new phase from now on (answers to queries
  // judged by the old one learn nothing: their generation is gone). Its
  // names were built when the policy was compiled and checked at Start; if
  // this failed anyway, the filter keeps the old phase's names, whose
  // answers can open nothing any more: closed, not open.
  SetDnsPhaseLocked().IgnoreError();
  return out;
}

absl::Status Sandbox::CutLocked(PhaseChange* out) {
  absl::StatusOr<std::vector<CutConnection>> cut =
      host_->CutConnections(cgroup_, netns_.get());
  if (cut.ok()) {
    out->cut = *std::move(cut);
    if (own_netns_unknown_) {
      out->not_cut =
          "the sandbox has its own network namespace, and which one is not "
          "known here: the connections there were not walked";
    }
  } else {
    out->not_cut = std::string(cut.status().message());
  }
  if (recorder_) recorder_->NoteCut(out->cut, out->not_cut);
  // Start refused CUT_REQUIRED where cutting cannot work at all: a failure
  // here is transient. The switch holds (the narrower phase is in force);
  // retrying it cuts.
  cut_pending_ = policy_.cut_required && !cut.ok();
  if (cut_pending_) {
    return absl::UnavailableError(absl::StrCat(
        "switched to phase ", out->phase,
        ", but on_switch: CUT_REQUIRED and the cut failed (retry the "
        "switch): ",
        cut.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace sandfence
