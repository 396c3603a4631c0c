// The egress controller: one loaded set of egress programs and maps that
// serves every sandbox on the host. It programs a sandbox's rules, attaches
// the hooks to its cgroup, switches phases atomically, and detaches.
//
// Thread-safe: every public method may be called from any thread.
#ifndef SANDFENCE_EGRESS_EGRESS_CONTROLLER_H_
#define SANDFENCE_EGRESS_EGRESS_CONTROLLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/bpf_handles.h"
#include "compile/compiled_policy.h"
#include "egress/egress_abi.h"
#include "egress/rule_entries.h"

struct sf_egress;

namespace sandfence {

struct EgressOptions {
  // Ring buffer size in bytes: a power of two, at least one page.
  uint32_t ring_bytes = 4u << 20;
  // Fail-closed across restarts: when set (a directory on a bpffs mount,
  // e.g. /sys/fs/bpf/sandfence), the maps are pinned under <pin_dir>/maps
  // (or reused when an earlier controller pinned them) and every sandbox's
  // links under <pin_dir>/links/<cgroup id>/. Enforcement then outlives
  // this process: destroying the controller (or the process dying) leaves
  // every sandbox attached, and a later controller with the same pin_dir
  // takes them over with AdoptSandbox.
  std::string pin_dir;
};

struct SandboxCounters {
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t events_lost = 0;  // kernel-side: ring buffer reserve failures
  // Allows not reported by the audit setting (not events, not losses).
  uint64_t allowed_unreported = 0;
};

class EgressController {
 public:
  // Loads the programs. Needs root (CAP_BPF + CAP_NET_ADMIN); an EPERM
  // comes back as PermissionDenied with the reason.
  static absl::StatusOr<std::unique_ptr<EgressController>> Create(
      const EgressOptions& options = {});
  ~EgressController();

  // Programs phase's rules for the sandbox whose cgroup directory is
  // cgroup_fd (id cgroup_id), then attaches the hooks to it. Nothing runs
  // in the sandbox unenforced if the caller spawns into it only afterwards.
  absl::Status AddSandbox(int cgroup_fd, uint64_t cgroup_id,
                          const CompiledPhase& phase);

  // Writes the new phase under a new generation, flips the sandbox to it in
  // one map update, then deletes the old generation: no connect is ever
  // judged by a half-written policy.
  absl::Status SwitchPhase(uint64_t cgroup_id, const CompiledPhase& phase);

  // Detaches and forgets the sandbox; returns its final counters.
  absl::StatusOr<SandboxCounters> RemoveSandbox(uint64_t cgroup_id);

  absl::StatusOr<SandboxCounters> Counters(uint64_t cgroup_id) const;
  // The generation the sandbox is on now (for tests and records).
  absl::StatusOr<uint32_t> Generation(uint64_t cgroup_id) const;

  // Pinned controllers only. Takes over a sandbox an earlier controller
  // attached and pinned: its links and its current generation (returned).
  // Its rules stay as they are until the next SwitchPhase.
  absl::StatusOr<uint32_t> AdoptSandbox(uint64_t cgroup_id);
  // The cgroup ids that have links pinned under pin_dir.
  std::vector<uint64_t> PinnedSandboxes() const;
  const std::string& pin_dir() const { return pin_dir_; }
  // Removes everything pinned under pin_dir: the links detach and the maps
  // go away with their last user. For `sandfence daemon --cleanup`.
  static absl::Status RemovePins(const std::string& pin_dir);

  // The sf_events ring buffer, for an EventReader.
  int events_fd() const;
  // Program fds by name (connect4, ...), for stats and tests.
  int prog_fd(absl::string_view hook) const;

 private:
  struct SandboxState {
    uint32_t generation = 0;
    RuleEntries entries;
    std::vector<BpfLink> links;
    // Adopted from an earlier controller: `entries` is unknown, so the
    // generation's entries are found by scanning the rule maps.
    bool adopted = false;
  };

  EgressController() = default;
  absl::Status WriteEntries(const RuleEntries& entries);
  void DeleteEntries(const RuleEntries& entries);
  absl::Status WriteSandbox(uint64_t cgroup_id, uint32_t generation,
                            uint32_t flags, uint64_t map_flags);
  void DeleteGeneration(uint32_t generation);
  void DeleteState(const SandboxState& state);
  uint32_t MaxGenerationInMaps() const;
  absl::Status PinLinks(uint64_t cgroup_id, std::vector<BpfLink>& links);
  void UnpinLinks(uint64_t cgroup_id, std::vector<BpfLink>& links);

  Skeleton<sf_egress> skel_;
  std::string pin_dir_;
  mutable absl::Mutex mu_;
  uint32_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, SandboxState> sandboxes_ ABSL_GUARDED_BY(mu_);
};

// The netns cookie of the calling process's network namespace.
absl::StatusOr<uint64_t> CurrentNetnsCookie();

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_EGRESS_CONTROLLER_H_
