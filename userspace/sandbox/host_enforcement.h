// What a sandbox's lifecycle needs from the kernel, as one interface: the
// seam between the lifecycle's logic (sandbox.h, the daemon's rollouts,
// `sandfence run`) and the BPF programs, maps and cgroups behind it.
// KernelEnforcement (kernel_enforcement.h) is the real one; tests run the
// same logic, without root, against FakeEnforcement (tests/sandbox).
#ifndef SANDFENCE_SANDBOX_HOST_ENFORCEMENT_H_
#define SANDFENCE_SANDBOX_HOST_ENFORCEMENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cgroup.h"
#include "compile/compiled_policy.h"
#include "egress/egress_controller.h"
#include "guard/guard_types.h"
#include "host/host_state.h"
#include "records/recorder.h"
#include "sandbox/event_hub.h"

namespace sandfence {

// The process guard as this process can have it. Two kinds of layer: a BPF
// guard on the sandbox's cgroup (lsm, signal), which governs whatever runs
// there, and confinement (Landlock + seccomp) that each process sandfence
// starts applies to itself. They stack: a driver that starts its processes
// confines them wherever the host can, whatever the BPF guard.
struct GuardInfo {
  // kLsm or kSignal: the BPF guard; kLandlock: confinement alone.
  Enforcer enforcer = Enforcer::kOff;
  // The processes the driver starts apply Landlock + seccomp.
  bool confined = false;
  std::string fallback_reason;  // why auto did not get lsm; "" otherwise
  // Why the host cannot confine; "" where it can.
  std::string confine_unavailable;
};

// "lsm", "landlock", "signal", "off"; "lsm+landlock" and "signal+landlock"
// where a BPF guard and confinement both hold.
std::string GuardLabel(const GuardInfo& guard);

// A sandbox some process left in the kernel, as a survivor finds it.
struct OrphanSandbox {
  KernelSandbox egress;
  DeadDriver owner;
  bool guarded = false;
};

class HostEnforcement {
 public:
  virtual ~HostEnforcement() = default;

  // --- cgroups ---
  // Creates a sandbox cgroup at path (its parent is created if missing)
  // and holds it open; AlreadyExists when path exists.
  virtual absl::StatusOr<CgroupRef> CreateCgroup(const std::string& path) = 0;
  // Holds an existing cgroup open (never killed or removed by End).
  virtual absl::StatusOr<CgroupRef> OpenCgroup(const std::string& path) = 0;
  // The path of a cgroup named by id (NotFound once it is gone).
  virtual absl::StatusOr<std::string> CgroupPath(uint64_t cgroup_id) = 0;
  // Kills every process in the cgroup and its descendants and waits until
  // it is empty (the directory stays).
  virtual absl::Status KillCgroup(uint64_t cgroup_id) = 0;
  // Removes a created cgroup's directory (after KillCgroup) and lets go of
  // it; for an opened one, only lets go.
  virtual absl::Status ReleaseCgroup(uint64_t cgroup_id, bool remove) = 0;
  // Why the cgroup is gone (removed, or another cgroup at its path), or ""
  // while it is there (or cannot be told). Nothing runs in a removed one.
  virtual std::string CgroupGone(const CgroupRef& cgroup) = 0;

  // --- egress ---
  // Returns the generation written.
  virtual absl::StatusOr<uint32_t> AttachEgress(uint64_t cgroup_id,
                                                const CompiledPhase& phase,
                                                uint16_t phase_index) = 0;
  virtual absl::StatusOr<uint32_t> SwitchEgress(uint64_t cgroup_id,
                                                const CompiledPhase& phase,
                                                uint16_t phase_index) = 0;
  // After a switch: destroys the connections the sandbox opened that its
  // phase in force no longer allows, and returns them. FailedPrecondition,
  // with the reason, where the host cannot (Linux before 6.5).
  // Why CutConnections cannot run on this host; "" where it can.
  virtual std::string CutUnavailable() = 0;
  // netns_fd: the sandbox's own network namespace (its sockets live
  // there), or -1.
  virtual absl::StatusOr<std::vector<CutConnection>> CutConnections(
      const CgroupRef& cgroup, int netns_fd) = 0;
  virtual absl::StatusOr<SandboxCounters> DetachEgress(uint64_t cgroup_id) = 0;
  virtual absl::StatusOr<SandboxCounters> EgressCounters(
      uint64_t cgroup_id) = 0;
  virtual absl::StatusOr<AdoptedSandbox> AdoptEgress(uint64_t cgroup_id) = 0;
  // Why phases that check Unix sockets cannot be enforced here (empty:
  // they can): such a policy is refused before anything exists.
  virtual std::string UnixUnavailable() const = 0;
  // How the sandbox's processes reach Unix sockets (EgressController::
  // SetUnixTraits); a host without the cgroup Unix hooks ignores it.
  virtual absl::Status SetUnixTraits(uint64_t cgroup_id,
                                     const UnixTraits& traits) {
    (void)cgroup_id;
    (void)traits;
    return absl::OkStatus();
  }
  // Whether a supervisor can broker the sandboxes' Unix paths here
  // (confine/unix_broker.h): the cgroup Unix hooks judge them.
  virtual bool CanBrokerUnix() const { return false; }
  // A supervisor thread connects a socket on a sandbox's behalf
  // (EgressController::AllowBrokeredConnect).
  virtual absl::Status AllowBrokeredConnect(uint64_t cookie,
                                            uint64_t pid_tgid) {
    (void)cookie;
    (void)pid_tgid;
    return absl::FailedPreconditionError("nothing to broker here");
  }
  virtual void ForgetBrokeredConnect(uint64_t cookie) { (void)cookie; }

  // --- the process guard ---
  // Loads (or opens) the guard for `mode` without guarding anything:
  // refusals (lsm where it cannot run) come here, before anything exists.
  // spawns: the caller starts the sandbox's processes itself (`run`,
  // `enter`) and confines them when the result says `confined`; auto then
  // prefers Landlock + seccomp to the signal enforcer.
  virtual absl::StatusOr<GuardInfo> PrepareGuard(GuardMode mode,
                                                 bool spawns) = 0;
  // Puts the cgroup under the BPF guard of `mode` (kLsm or kSignal: what
  // PrepareGuard chose; kOff and kLandlock attach nothing).
  virtual absl::Status AddGuard(const CgroupRef& cgroup, GuardMode mode) = 0;
  // Returns the events the kernel lost for the sandbox.
  virtual absl::StatusOr<uint64_t> RemoveGuard(uint64_t cgroup_id) = 0;
  virtual absl::Status AdoptGuard(uint64_t cgroup_id) = 0;
  virtual absl::StatusOr<uint64_t> GuardEventsLost(uint64_t cgroup_id) = 0;
  // Keeps a file-system object of sandfence's (its state or records
  // directory, its socket) and everything under it out of every guarded
  // sandbox's reach: no unlink, rename, write, chmod or connect. Applied
  // now if the guard is loaded, else when it loads; the pin root is always
  // protected. For objects that live as long as the host's sandfence does
  // (inodes are reused: a short-lived file is not for this).
  virtual absl::Status Protect(const std::string& path) = 0;

  // --- the DNS filter (issue 14) ---
  // Serves the sandbox's DNS queries from now on: a filter target of its
  // own, written into the kernel (in DNS-filtered phases the sandbox's
  // port-53 queries go there and nowhere else), answered from
  // `upstreams`; each query's outcome goes to `on_query`, on another
  // thread. After AttachEgress, before anything runs in the sandbox.
  // netns_fd: the sandbox's own network namespace, where the target's
  // sockets are made (the filter still asks the upstreams from the
  // host's); -1: the host's.
  virtual absl::Status StartDns(
      uint64_t cgroup_id, const std::vector<HostPort>& upstreams,
      std::function<void(const DnsQueryInfo&)> on_query, int netns_fd) = 0;
  // The names `phase` allows from now on; addresses its answers carry are
  // opened in `generation`.
  virtual absl::Status SetDnsPhase(uint64_t cgroup_id,
                                   const CompiledPhase& phase,
                                   uint32_t generation) = 0;
  // Stops serving the sandbox (its queries fail from now on).
  virtual void StopDns(uint64_t cgroup_id) = 0;
  // The addresses the sandbox's filter has learned and the kernel holds
  // now (for metrics); Unimplemented where the enforcement cannot tell.
  virtual absl::StatusOr<size_t> DnsLearnedCount(uint64_t cgroup_id) {
    (void)cgroup_id;
    return absl::UnimplementedError("learned addresses are not counted here");
  }

  // --- survivors ---
  // Processes that used the host's state and died without leaving.
  virtual std::vector<DeadDriver> DeadDrivers() = 0;
  // Sandboxes whose owning process died without ending them.
  virtual std::vector<OrphanSandbox> Orphans() = 0;
  // Reads what the kernel queued in a dead process's rings (events its
  // adopted sandboxes had while no process read them) into the hub.
  // Nothing, if the slot is no longer that dead process's (see
  // ForgetDeadDriver): a live one's events are its own to read.
  virtual absl::Status RecoverEvents(const DeadDriver& dead) = 0;
  // Frees a dead process's slot (and its rings) once none of its sandboxes
  // is left, after completing the deletes it had queued (old phases'
  // entries) when it died. Nothing, if another process forgot it first
  // (the slot may be a live process's by then).
  virtual void ForgetDeadDriver(const DeadDriver& dead) = 0;

  // --- events ---
  virtual EventHub& events() = 0;
  // Waits up to timeout_ms for this process's events and dispatches them.
  virtual absl::StatusOr<int> PollEvents(int timeout_ms) = 0;
  // Dispatches what the kernel has queued for this process, no waiting.
  virtual absl::StatusOr<int> DrainEvents() = 0;

  // What a record says of the egress enforcer ("cgroup-bpf").
  virtual std::string EgressName() const = 0;
  // The process guard as the host has it: the loaded enforcer ("lsm",
  // "signal (lsm unavailable: ...)"), or what a first guarded sandbox would
  // load.
  virtual std::string GuardStatus() = 0;
  // The cgroup ids of every sandbox on the host, whoever owns it.
  virtual std::vector<uint64_t> AllSandboxes() = 0;
  // Where the host's state is pinned ("" when private).
  virtual std::string PinRoot() const = 0;
};

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_HOST_ENFORCEMENT_H_
