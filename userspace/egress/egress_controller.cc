// A sandbox's kernel state: its entry, generations, counters and phase
// switches; this process's event ring.
#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/bpf_handles.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/controller_internal.h"
#include "egress/egress_rules.h"
#include "host/bpf_object.h"

namespace sandfence {

absl::StatusOr<std::unique_ptr<EgressController>> EgressController::Create(
    HostState* host, const EgressOptions& options) {
  std::unique_ptr<EgressController> c(new EgressController(host));
  c->unix_bind_tracker_ = options.unix_bind_tracker;
  if (absl::Status s = c->LoadOrOpen(); !s.ok()) return s;
  if (absl::Status s = c->CreateRing(options.ring_bytes); !s.ok()) return s;
  return c;
}

absl::Status EgressController::CreateRing(uint32_t ring_bytes) {
  absl::StatusOr<UniqueFd> ring = CreateSlotRing(
      maps_.rings.get(), host_->slot(), "sf_events", ring_bytes);
  if (!ring.ok()) return ring.status();
  ring_ = *std::move(ring);
  return absl::OkStatus();
}

absl::StatusOr<EgressController::SandboxState*> EgressController::Find(
    uint64_t cgroup_id) {
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  return &it->second;
}

absl::StatusOr<const EgressController::SandboxState*> EgressController::Find(
    uint64_t cgroup_id) const {
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  return &it->second;
}

absl::StatusOr<UniqueFd> EgressController::RingOfSlot(uint32_t slot) const {
  return RingOfMapSlot(maps_.rings.get(), slot);
}

void EgressController::ClearSlot(uint32_t slot) {
  if (slot != host_->slot()) bpf_map_delete_elem(maps_.rings.get(), &slot);
}

EgressController::~EgressController() {
  ReleaseDeletesForTest();
  absl::MutexLock lock(&mu_);
  if (host_->pinned()) {
    // The sandboxes stay enforced. Their events keep going to this
    // process's ring, which stays in its slot for a successor to read; a
    // process that leaves nothing behind takes its ring along.
    if (sandboxes_.empty()) {
      const uint32_t slot = host_->slot();
      bpf_map_delete_elem(maps_.rings.get(), &slot);
    }
    return;
  }
  for (auto& [id, state] : sandboxes_) {
    Detach(id, state);
    DeleteState(state);
    DeleteLearned(state);
    bpf_map_delete_elem(maps_.dns_targets.get(), &id);
    bpf_map_delete_elem(maps_.counters.get(), &id);
    budget_maps().Delete(id);
  }
}

int EgressController::prog_fd(absl::string_view hook) const {
  auto it = progs_.find(hook);
  return it == progs_.end() ? -1 : it->second.get();
}

std::string EgressController::LinkDir(uint64_t cgroup_id) const {
  return host_->pins().SandboxLinksDir(cgroup_id);
}

absl::Status EgressController::SeedShallowestLevel() {
  const uint32_t zero = 0;
  sf_levels levels{};
  if (bpf_map_lookup_elem(maps_.levels.get(), &zero, &levels) != 0) {
    return ErrnoError(errno, "read sf_levels");
  }
  uint64_t key = 0;
  if (levels.shallowest != 0 ||
      bpf_map_get_next_key(maps_.sandboxes.get(), nullptr, &key) != 0) {
    return absl::OkStatus();  // set already, or no sandbox yet
  }
  // Sandboxes whose levels nobody wrote down: walk them all.
  levels.shallowest = 1;
  if (bpf_map_update_elem(maps_.levels.get(), &zero, &levels, BPF_ANY) != 0) {
    return ErrnoError(errno, "write sf_levels");
  }
  return absl::OkStatus();
}

absl::Status EgressController::LowerShallowestLevel(uint32_t level) {
  // A level counted inside a cgroup namespace is at most the kernel's, so
  // lowering to it is safe; 0 (a namespace's root) would read as "none
  // yet", so it is 1, the shallowest there is.
  level = std::max<uint32_t>(level, 1);
  const uint32_t zero = 0;
  sf_levels levels{};
  // Only ever lowered: a value at or above this level stays true, and
  // needs no lock.
  if (bpf_map_lookup_elem(maps_.levels.get(), &zero, &levels) != 0) {
    return ErrnoError(errno, "read sf_levels");
  }
  if (levels.shallowest != 0 && levels.shallowest <= level) {
    return absl::OkStatus();
  }
  // Read and written under the host lock: two processes lowering at once
  // must not leave the deeper of their levels.
  HostState::Lock lock = host_->Exclusive();
  if (bpf_map_lookup_elem(maps_.levels.get(), &zero, &levels) != 0) {
    return ErrnoError(errno, "read sf_levels");
  }
  if (levels.shallowest != 0 && levels.shallowest <= level) {
    return absl::OkStatus();
  }
  levels.shallowest = level;
  if (bpf_map_update_elem(maps_.levels.get(), &zero, &levels, BPF_ANY) != 0) {
    return ErrnoError(errno, "write sf_levels");
  }
  return absl::OkStatus();
}

absl::Status EgressController::WriteSandbox(uint64_t cgroup_id,
                                            const SandboxState& state,
                                            uint64_t map_flags) {
  sf_sandbox value{};
  value.generation = state.generation;
  value.flags = state.flags;
  value.phase = state.phase;
  value.ring = static_cast<uint8_t>(host_->slot());
  if (bpf_map_update_elem(maps_.sandboxes.get(), &cgroup_id, &value,
                          map_flags) != 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(
          "cgroup ", cgroup_id,
          " is already a sandbox (enforced by another sandfence process)"));
    }
    return MapWriteError(errno, "sf_sandboxes");
  }
  return absl::OkStatus();
}

SandboxCounters EgressController::TakeCounters(uint64_t cgroup_id) {
  SandboxCounters out;
  sf_counters c{};
  if (bpf_map_lookup_elem(maps_.counters.get(), &cgroup_id, &c) == 0) {
    out = {c.allowed, c.denied, c.events_lost, c.allowed_unreported,
           c.audit_denied, std::nullopt};
  }
  out.budget = budget_maps().Read(cgroup_id);
  bpf_map_delete_elem(maps_.counters.get(), &cgroup_id);
  budget_maps().Delete(cgroup_id);
  return out;
}

absl::StatusOr<uint32_t> EgressController::AddSandbox(
    int cgroup_fd, const CgroupRef& cgroup, const CompiledPhase& phase,
    uint16_t phase_index) {
  const uint64_t id = cgroup.id;
  if (cgroup.level > SF_MAX_CGROUP_DEPTH) {
    return Rejected(absl::StrCat(
        "sandbox ", cgroup.path, " is at cgroup level ", cgroup.level,
        "; the egress programs judge sandboxes down to level ",
        SF_MAX_CGROUP_DEPTH));
  }
  if (absl::Status s = CheckUnix(phase); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup.path, " is already a sandbox"));
  }
  absl::StatusOr<uint32_t> generation = host_->AllocateGeneration();
  if (!generation.ok()) return generation.status();
  SandboxState state;
  state.generation = *generation;
  state.phase = phase_index;
  state.flags = SandboxFlags(phase);
  // Its binds are tracked from the start where its phase checks names
  // (until a supervisor brokers its paths).
  if (ReliesOnBindTracker(state.flags)) {
    if (absl::Status s = UpdateBindTracker(/*attach=*/true); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<RuleEntries> entries =
      BuildRuleEntries(phase, state.generation);
  if (!entries.ok()) return entries.status();
  state.entries = *std::move(entries);
  if (absl::Status s = WriteEntriesOrReap(state.entries); !s.ok()) return s;

  // Without its counters a sandbox's record could not show it is whole:
  // a full counters map is a (retryable) refusal, not a silent gap.
  sf_counters zero{};
  if (bpf_map_update_elem(maps_.counters.get(), &id, &zero, BPF_NOEXIST) != 0 &&
      errno != EEXIST) {
    const int err = errno;
    DeleteEntries(state.entries);
    return Unavailable(absl::StrCat("counters for sandbox ", cgroup.path, ": ",
                                    std::strerror(err)));
  }
  // The budget is the rollout's, written once: phases switch, counts go on.
  // Its limits exist before any phase can say SF_SB_BUDGET.
  if (absl::Status s = budget_maps().Set(id, phase.egress_budget); !s.ok()) {
    DeleteEntries(state.entries);
    bpf_map_delete_elem(maps_.counters.get(), &id);
    return s;
  }
  auto undo = [&] {
    DeleteEntries(state.entries);
    bpf_map_delete_elem(maps_.counters.get(), &id);
    budget_maps().Delete(id);
  };
  // The walks must reach this level before the entry and links exist.
  if (absl::Status s = LowerShallowestLevel(cgroup.level); !s.ok()) {
    undo();
    return s;
  }
  if (absl::Status s = WriteSandbox(id, state, BPF_NOEXIST); !s.ok()) {
    // Another process's sandbox: its counters and budget are not ours.
    if (absl::IsAlreadyExists(s)) {
      DeleteEntries(state.entries);
    } else {
      undo();
    }
    return s;
  }
  if (absl::Status s = Attach(cgroup_fd, cgroup, state); !s.ok()) {
    undo();
    return s;
  }
  const uint32_t out = state.generation;
  sandboxes_.emplace(id, std::move(state));
  return out;
}

absl::StatusOr<uint32_t> EgressController::SwitchPhase(
    uint64_t cgroup_id, const CompiledPhase& phase, uint16_t phase_index) {
  if (absl::Status s = CheckUnix(phase); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SandboxState*> found = Find(cgroup_id);
  if (!found.ok()) return found.status();
  absl::StatusOr<uint32_t> generation = host_->AllocateGeneration();
  if (!generation.ok()) return generation.status();
  SandboxState next;
  next.generation = *generation;
  next.phase = phase_index;
  next.unix_traits = (*found)->unix_traits;
  next.flags = WithUnixTraits(SandboxFlags(phase), next.unix_traits);
  if (ReliesOnBindTracker(next.flags)) {
    if (absl::Status s = UpdateBindTracker(/*attach=*/true); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<RuleEntries> entries =
      BuildRuleEntries(phase, next.generation);
  if (!entries.ok()) return entries.status();
  next.entries = *std::move(entries);
  // 1. The new generation is complete before anything can see it.
  if (absl::Status s = WriteEntriesOrReap(next.entries); !s.ok()) return s;
  // 2. One map update flips the sandbox from the old rules to the new.
  if (absl::Status s = WriteSandbox(cgroup_id, next, BPF_EXIST); !s.ok()) {
    DeleteEntries(next.entries);
    return s;
  }
  // 3. Nothing refers to the old generation any more: its rules and the
  // addresses learned under it go (the filter learns anew for the phase),
  // once this has returned.
  SandboxState& state = **found;
  auto old = std::make_shared<SandboxState>();
  old->generation = state.generation;
  old->adopted = state.adopted;
  old->entries = std::move(state.entries);
  old->learned = std::move(state.learned);
  state.learned.clear();
  // Journaled first: if this process dies before its reaper runs, the
  // one that forgets its dead driver completes the deletes.
  Doom(old->generation);
  reaper_.Post([this, old, cgroup_id] {
    DeleteState(*old);
    DeleteLearned(*old);
    DeleteSeen(cgroup_id, old->generation);
    Undoom(old->generation);
  });
  state.adopted = false;
  state.entries = std::move(next.entries);
  state.generation = next.generation;
  state.phase = next.phase;
  state.flags = next.flags;
  return state.generation;
}

absl::StatusOr<SandboxCounters> EgressController::RemoveSandbox(
    uint64_t cgroup_id) {
  bool tracked = false;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<SandboxState*> found = Find(cgroup_id);
    if (!found.ok()) return found.status();
    SandboxState& state = **found;
    tracked = ReliesOnBindTracker(state.flags);
    Detach(cgroup_id, state);
    DeleteState(state);
    DeleteLearned(state);
    bpf_map_delete_elem(maps_.dns_targets.get(), &cgroup_id);
    const uint32_t generation = state.generation;
    sandboxes_.erase(cgroup_id);
    // A scan of two caches: off the caller's path, journaled as a switch's.
    Doom(generation);
    reaper_.Post([this, cgroup_id, generation] {
      DeleteSeen(cgroup_id);
      Undoom(generation);
    });
  }
  // The last sandbox that needed the bind tracker takes it along.
  if (tracked) UpdateBindTracker().IgnoreError();
  return TakeCounters(cgroup_id);
}

absl::StatusOr<SandboxCounters> EgressController::Counters(
    uint64_t cgroup_id) const {
  sf_counters c{};
  if (bpf_map_lookup_elem(maps_.counters.get(), &cgroup_id, &c) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no counters for cgroup ", cgroup_id));
  }
  return SandboxCounters{c.allowed,
                         c.denied,
                         c.events_lost,
                         c.allowed_unreported,
                         c.audit_denied,
                         budget_maps().Read(cgroup_id)};
}

absl::StatusOr<uint32_t> EgressController::Generation(
    uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const SandboxState*> found = Find(cgroup_id);
  if (!found.ok()) return found.status();
  return (*found)->generation;
}

std::vector<KernelSandbox> EgressController::KernelSandboxes() const {
  std::vector<KernelSandbox> out;
  const int fd = maps_.sandboxes.get();
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    sf_sandbox v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) {
      out.push_back({next, v.generation, v.flags, v.phase, v.ring});
    }
    key = next;
    prev = &key;
  }
  return out;
}

absl::StatusOr<KernelSandbox> EgressController::KernelSandboxOf(
    uint64_t cgroup_id) const {
  sf_sandbox v{};
  if (bpf_map_lookup_elem(maps_.sandboxes.get(), &cgroup_id, &v) != 0) {
    return absl::NotFoundError(
        absl::StrCat("the kernel holds no sandbox for cgroup ", cgroup_id));
  }
  return KernelSandbox{cgroup_id, v.generation, v.flags, v.phase, v.ring};
}

absl::Status EgressController::RemovePins(const std::string& pin_root) {
  return RemovePinnedTree(pin_root);
}

}  // namespace sandfence
