// HostEnforcement over the real kernel: this process's membership of the
// host's shared state (HostState), the egress controller, the process guard
// (loaded on first use, one per host), the cgroups it holds, and one event
// source over its two rings.
#ifndef SANDFENCE_SANDBOX_KERNEL_ENFORCEMENT_H_
#define SANDFENCE_SANDBOX_KERNEL_ENFORCEMENT_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "egress/egress_controller.h"
#include "guard/guard_controller.h"
#include "host/host_state.h"
#include "sandbox/dns_filter_host.h"
#include "sandbox/event_hub.h"
#include "sandbox/host_enforcement.h"

namespace sandfence {

struct KernelEnforcementOptions {
  HostOptions host;
  EgressOptions egress;
};

class KernelEnforcement : public HostEnforcement {
 public:
  // Needs root. Joins (or creates) the host's shared state.
  static absl::StatusOr<std::unique_ptr<KernelEnforcement>> Create(
      const KernelEnforcementOptions& options);
  ~KernelEnforcement() override;

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
  std::string CutUnavailable() override;
  absl::StatusOr<std::vector<CutConnection>> CutConnections(
      const CgroupRef& cgroup, int netns_fd) override;
  absl::StatusOr<SandboxCounters> DetachEgress(uint64_t cgroup_id) override;
  absl::StatusOr<SandboxCounters> EgressCounters(uint64_t cgroup_id) override;
  absl::StatusOr<AdoptedSandbox> AdoptEgress(uint64_t cgroup_id) override;

  absl::StatusOr<GuardInfo> PrepareGuard(GuardMode mode, bool spawns) override;
  absl::Status AddGuard(const CgroupRef& cgroup, GuardMode mode) override;
  absl::StatusOr<uint64_t> RemoveGuard(uint64_t cgroup_id) override;
  absl::Status AdoptGuard(uint64_t cgroup_id) override;
  absl::StatusOr<uint64_t> GuardEventsLost(uint64_t cgroup_id) override;
  absl::Status Protect(const std::string& path) override;

  absl::Status StartDns(
      uint64_t cgroup_id, const std::vector<HostPort>& upstreams,
      std::function<void(const DnsQueryInfo&)> on_query,
      int netns_fd) override;
  absl::Status SetDnsPhase(uint64_t cgroup_id, const CompiledPhase& phase,
                           uint32_t generation) override;
  void StopDns(uint64_t cgroup_id) override;
  absl::StatusOr<size_t> DnsLearnedCount(uint64_t cgroup_id) override;

  std::vector<DeadDriver> DeadDrivers() override;
  std::vector<OrphanSandbox> Orphans() override;
  absl::Status RecoverEvents(const DeadDriver& dead) override;
  void ForgetDeadDriver(const DeadDriver& dead) override;

  EventHub& events() override { return hub_; }
  absl::StatusOr<int> PollEvents(int timeout_ms) override;
  absl::StatusOr<int> DrainEvents() override;

  std::string EgressName() const override { return "cgroup-bpf"; }
  std::string UnixUnavailable() const override {
    return egress_->unix_unavailable();
  }
  absl::Status SetUnixTraits(uint64_t cgroup_id,
                             const UnixTraits& traits) override {
    return egress_->SetUnixTraits(cgroup_id, traits);
  }
  bool CanBrokerUnix() const override {
    return egress_->unix_enforcer() ==
           EgressController::UnixEnforcer::kCgroupHooks;
  }
  absl::Status AllowBrokeredConnect(uint64_t cookie,
                                    uint64_t pid_tgid) override {
    return egress_->AllowBrokeredConnect(cookie, pid_tgid);
  }
  void ForgetBrokeredConnect(uint64_t cookie) override {
    egress_->ForgetBrokeredConnect(cookie);
  }
  std::string GuardStatus() override;
  std::vector<uint64_t> AllSandboxes() override;
  std::string PinRoot() const override { return host_->pin_root(); }

  HostState& host() { return *host_; }
  EgressController& egress() { return *egress_; }
  // The loaded guard, if any (nullptr before the first guarded sandbox).
  GuardController* guard();
  // A cgroup this object holds, for spawning into it (-1: not held).
  int CgroupFd(uint64_t cgroup_id);

 private:
  KernelEnforcement() = default;
  // The host's guard, if one is pinned, without loading one.
  GuardController* PinnedGuard() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_mu_);
  absl::Status RebuildEventSource();
  void CollectExpiredDns();

  std::unique_ptr<HostState> host_;
  std::unique_ptr<EgressController> egress_;
  EventHub hub_;

  // A guard just loaded or opened: the event source reads its ring, and
  // sandfence's own objects are protected.
  absl::Status GuardLoaded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_mu_);

  absl::Mutex guard_mu_;
  std::optional<GuardController> guard_ ABSL_GUARDED_BY(guard_mu_);
  std::vector<std::string> protected_ ABSL_GUARDED_BY(guard_mu_);

  // This process's DNS filter, started with the first filtered sandbox;
  // expired learned addresses are collected from the poll loop.
  absl::Mutex dns_mu_;
  std::unique_ptr<DnsFilterHost> dns_ ABSL_GUARDED_BY(dns_mu_);
  std::atomic<int64_t> next_collect_mono_ns_{0};

  absl::Mutex source_mu_;
  std::unique_ptr<KernelEventSource> source_ ABSL_GUARDED_BY(source_mu_);

  // A cgroup is held once however many sandboxes use it (an owner and its
  // borrowers): the last release decides.
  struct HeldCgroup {
    Cgroup cgroup;
    int users = 0;
  };
  absl::Mutex cgroups_mu_;
  absl::flat_hash_map<uint64_t, HeldCgroup> cgroups_
      ABSL_GUARDED_BY(cgroups_mu_);
  CgroupRef Hold(Cgroup cgroup);
};

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_KERNEL_ENFORCEMENT_H_
