// An in-memory HostEnforcement: the lifecycle's and the daemon's logic run
// against it without root and without BPF.
//
// FakeKernel is what the real kernel keeps across processes (cgroups, the
// egress entries with their generation and phase index, guard membership,
// dead drivers): it outlives any one FakeEnforcement, so a second daemon
// over the same FakeKernel adopts what the first left, as over the pinned
// host. FakeEnforcement is one process's view of it (its driver slot, its
// event hub, the cgroups it holds).
//
// Scripting: FailNth makes a chosen call fail with a chosen status;
// OnCall sees every call before it runs (to check ordering); Calls() is the
// log. Thread-safe.
#ifndef SANDFENCE_TESTS_SANDBOX_FAKE_ENFORCEMENT_H_
#define SANDFENCE_TESTS_SANDBOX_FAKE_ENFORCEMENT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sandbox/host_enforcement.h"

namespace sandfence::testing {

// The methods of HostEnforcement, by name, for faults and the call log.
enum class FakeCall {
  kCreateCgroup,
  kOpenCgroup,
  kCgroupPath,
  kKillCgroup,
  kReleaseCgroup,
  kAttachEgress,
  kSwitchEgress,
  kDetachEgress,
  kEgressCounters,
  kAdoptEgress,
  kPrepareGuard,
  kAddGuard,
  kRemoveGuard,
  kAdoptGuard,
  kGuardEventsLost,
  kProtect,
  kRecoverEvents,
  kDrainEvents,
  kStartDns,
  kSetDnsPhase,
  kStopDns,
};

const char* FakeCallName(FakeCall call);

// One sandbox's egress entry, as sf_sandboxes holds it.
struct FakeEgress {
  uint32_t generation = 0;
  uint16_t phase = 0;
  uint8_t ring = 0;  // the owner's driver slot
  SandboxCounters counters;
  // The phase attached or switched to is audit only (SF_SB_AUDIT).
  bool audit_only = false;
  // Hooks whose pinned links are gone: AdoptEgress reports them.
  std::vector<std::string> missing_hooks;
};

// One sandbox's DNS filter, as the fake serves it.
struct FakeDns {
  std::vector<HostPort> upstreams;
  std::string phase;        // the names of this phase are served ("": none)
  uint32_t generation = 0;  // learned into
  std::function<void(const DnsQueryInfo&)> on_query;
  int netns_fd = -1;  // where the listeners would be made (-1: the host's)
};

struct FakeCgroup {
  CgroupRef ref;
  bool created = false;  // by CreateCgroup (else an existing one)
  int holders = 0;       // opened and not yet released, over all processes
  int kills = 0;         // KillCgroup calls
  bool removed = false;  // ReleaseCgroup(remove = true)
};

class FakeKernel {
 public:
  FakeKernel() = default;
  FakeKernel(const FakeKernel&) = delete;
  FakeKernel& operator=(const FakeKernel&) = delete;

  // --- scripting ---
  // The n-th call of `call` from now (1 = the next) fails with status,
  // before it changes anything.
  void FailNth(FakeCall call, int n, absl::Status status);
  // Sees every call (with its cgroup id, 0 when none) before it runs or
  // fails; runs without the fake's lock held, so it may read the fake.
  void OnCall(std::function<void(FakeCall, uint64_t)> observer);
  // An existing cgroup (OpenCgroup finds it). Returns its ref.
  CgroupRef AddCgroup(const std::string& path);
  // The cgroup at `path` is removed behind sandfence's back (a runtime's
  // rmdir): CgroupGone says so from now on.
  void RemoveCgroupBehindOurBack(const std::string& path);
  // Puts an egress entry in place, as a process that died left it.
  void PutEgress(uint64_t cgroup_id, const FakeEgress& egress);
  void SetCounters(uint64_t cgroup_id, const SandboxCounters& counters);
  void PutGuard(uint64_t cgroup_id, GuardMode mode);
  void SetGuardLost(uint64_t cgroup_id, uint64_t lost);
  // The enforcer a guard mode gets here (lsm refused unless kLsm).
  void SetGuardEnforcer(Enforcer enforcer, std::string fallback_reason);
  // A process of `kind` held `slot` and died without leaving.
  void AddDeadDriver(uint32_t slot, DriverKind kind, pid_t pid);
  // Events a dead process's rings still hold (RecoverEvents reads them).
  void QueueForSlot(uint32_t slot, const NetEvent& event);

  // --- inspection ---
  std::vector<std::string> Calls() const;  // "AttachEgress(1001)", in order
  int CallCount(FakeCall call) const;
  std::optional<FakeCgroup> Cgroup(const std::string& path) const;
  std::optional<FakeCgroup> CgroupById(uint64_t id) const;
  std::optional<FakeEgress> Egress(uint64_t cgroup_id) const;
  std::map<uint64_t, FakeEgress> AllEgress() const;
  std::optional<GuardMode> Guarded(uint64_t cgroup_id) const;
  std::vector<std::string> Protected() const;
  std::vector<uint32_t> ForgottenSlots() const;
  std::optional<FakeDns> Dns(uint64_t cgroup_id) const;
  uint32_t last_generation() const;

 private:
  friend class FakeEnforcement;

  // Logs the call, runs the observer, and returns the scripted fault.
  absl::Status Enter(FakeCall call, uint64_t id);
  absl::StatusOr<CgroupRef> HoldLocked(const std::string& path, bool create)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  FakeCgroup* FindLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t NewIdLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::function<void(FakeCall, uint64_t)> observer_ ABSL_GUARDED_BY(mu_);
  struct Fault {
    FakeCall call;
    int remaining;  // calls left before the failing one
    absl::Status status;
  };
  std::vector<Fault> faults_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::map<FakeCall, int> counts_ ABSL_GUARDED_BY(mu_);

  std::map<std::string, FakeCgroup> cgroups_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1000;
  std::map<uint64_t, FakeEgress> egress_ ABSL_GUARDED_BY(mu_);
  uint32_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, GuardMode> guarded_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, FakeDns> dns_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> guard_lost_ ABSL_GUARDED_BY(mu_);
  Enforcer enforcer_ ABSL_GUARDED_BY(mu_) = Enforcer::kSignal;
  std::string fallback_reason_ ABSL_GUARDED_BY(mu_) = "fake: no BPF LSM";
  bool guard_loaded_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> protected_ ABSL_GUARDED_BY(mu_);
  std::vector<DeadDriver> dead_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> forgotten_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::vector<NetEvent>> slot_events_ ABSL_GUARDED_BY(mu_);
  uint32_t next_slot_ ABSL_GUARDED_BY(mu_) = 1;
};

class FakeEnforcement : public HostEnforcement {
 public:
  // One process on `kernel`, in a fresh driver slot.
  explicit FakeEnforcement(std::shared_ptr<FakeKernel> kernel);
  // Lets go of the cgroups it holds (never removes them): what it enforced
  // stays in the kernel, as on a pinned host.
  ~FakeEnforcement() override;

  uint32_t slot() const { return slot_; }
  FakeKernel& kernel() { return *kernel_; }
  // An event the kernel queued in this process's ring: the next
  // PollEvents or DrainEvents dispatches it.
  void Queue(const NetEvent& event);
  void Queue(const sf_guard_event& event);

  absl::StatusOr<CgroupRef> CreateCgroup(const std::string& path) override;
  absl::StatusOr<CgroupRef> OpenCgroup(const std::string& path) override;
  absl::StatusOr<std::string> CgroupPath(uint64_t cgroup_id) override;
  absl::Status KillCgroup(uint64_t cgroup_id) override;
  absl::Status ReleaseCgroup(uint64_t cgroup_id, bool remove) override;
  std::string CgroupGone(const CgroupRef& cgroup) override;
  absl::StatusOr<uint32_t> AttachEgress(uint64_t cgroup_id,
                                        const CompiledPhase& phase,
                                        uint16_t phase_index) override;
  absl::StatusOr<uint32_t> SwitchEgress(uint64_t cgroup_id,
                                        const CompiledPhase& phase,
                                        uint16_t phase_index) override;
  // A host that cannot cut says why ("": it can).
  std::string cut_unavailable;
  std::string CutUnavailable() override { return cut_unavailable; }
  // Cuts nothing: the fake kernel has no sockets.
  absl::StatusOr<std::vector<CutConnection>> CutConnections(
      const CgroupRef& /*cgroup*/, int /*netns_fd*/) override {
    if (!cut_unavailable.empty()) {
      return absl::FailedPreconditionError(cut_unavailable);
    }
    return std::vector<CutConnection>{};
  }
  absl::StatusOr<SandboxCounters> DetachEgress(uint64_t cgroup_id) override;
  absl::StatusOr<SandboxCounters> EgressCounters(uint64_t cgroup_id) override;
  absl::StatusOr<AdoptedSandbox> AdoptEgress(uint64_t cgroup_id) override;
  absl::StatusOr<GuardInfo> PrepareGuard(GuardMode mode, bool spawns) override;
  absl::Status AddGuard(const CgroupRef& cgroup, GuardMode mode) override;
  absl::StatusOr<uint64_t> RemoveGuard(uint64_t cgroup_id) override;
  absl::Status AdoptGuard(uint64_t cgroup_id) override;
  absl::StatusOr<uint64_t> GuardEventsLost(uint64_t cgroup_id) override;
  absl::Status Protect(const std::string& path) override;
  std::vector<DeadDriver> DeadDrivers() override;
  std::vector<OrphanSandbox> Orphans() override;
  absl::Status RecoverEvents(const DeadDriver& dead) override;
  void ForgetDeadDriver(const DeadDriver& dead) override;
  absl::Status StartDns(
      uint64_t cgroup_id, const std::vector<HostPort>& upstreams,
      std::function<void(const DnsQueryInfo&)> on_query,
      int netns_fd) override;
  absl::Status SetDnsPhase(uint64_t cgroup_id, const CompiledPhase& phase,
                           uint32_t generation) override;
  void StopDns(uint64_t cgroup_id) override;
  EventHub& events() override { return hub_; }
  absl::StatusOr<int> PollEvents(int timeout_ms) override;
  absl::StatusOr<int> DrainEvents() override;
  std::string EgressName() const override { return "fake"; }
  std::string UnixUnavailable() const override { return unix_unavailable; }
  // What UnixUnavailable() says (a test sets it to play an old kernel).
  std::string unix_unavailable;
  std::string GuardStatus() override;
  std::vector<uint64_t> AllSandboxes() override;
  std::string PinRoot() const override { return ""; }

 private:
  int Dispatch();
  bool Queued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<FakeKernel> kernel_;
  uint32_t slot_ = 0;
  EventHub hub_;

  absl::Mutex mu_;
  // Cgroup ids this process holds, with how often.
  std::map<uint64_t, int> held_ ABSL_GUARDED_BY(mu_);
  std::deque<NetEvent> net_queue_ ABSL_GUARDED_BY(mu_);
  std::deque<sf_guard_event> guard_queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SANDBOX_FAKE_ENFORCEMENT_H_
