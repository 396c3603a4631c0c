// A HostEnforcement that forwards every call to a real one, except that
// AttachEgress waits at a gate the test opens. A test holds a start in the
// window between its cgroup's creation and its attachment, and checks what
// other calls do meanwhile, whatever the machine's speed.
#ifndef SANDFENCE_TESTS_SANDBOX_GATED_ENFORCEMENT_H_
#define SANDFENCE_TESTS_SANDBOX_GATED_ENFORCEMENT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sandbox/host_enforcement.h"

namespace sandfence::testing {

class GatedEnforcement : public HostEnforcement {
 public:
  explicit GatedEnforcement(std::unique_ptr<HostEnforcement> inner)
      : inner_(std::move(inner)) {}

  // From now on AttachEgress waits (at most `limit`, so that a broken test
  // cannot hang) until Open().
  void Close() {
    absl::MutexLock l(&mu_);
    closed_ = true;
  }
  void Open() {
    absl::MutexLock l(&mu_);
    closed_ = false;
  }
  // Whether an AttachEgress is waiting at the gate now.
  bool WaitingFor(absl::Duration limit) {
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&waiting_), limit);
  }

  absl::StatusOr<uint32_t> AttachEgress(uint64_t cgroup_id,
                                        const CompiledPhase& phase,
                                        uint16_t phase_index) override {
    {
      absl::MutexLock l(&mu_);
      waiting_ = closed_;
      mu_.AwaitWithTimeout(absl::Condition(&IsOpen, this), absl::Seconds(60));
      waiting_ = false;
    }
    return inner_->AttachEgress(cgroup_id, phase, phase_index);
  }

  absl::StatusOr<CgroupRef> CreateCgroup(const std::string& path) override {
    return inner_->CreateCgroup(path);
  }
  absl::StatusOr<CgroupRef> OpenCgroup(const std::string& path) override {
    return inner_->OpenCgroup(path);
  }
  absl::StatusOr<std::string> CgroupPath(uint64_t id) override {
    return inner_->CgroupPath(id);
  }
  absl::Status KillCgroup(uint64_t id) override {
    return inner_->KillCgroup(id);
  }
  absl::Status ReleaseCgroup(uint64_t id, bool remove) override {
    return inner_->ReleaseCgroup(id, remove);
  }
  std::string CgroupGone(const CgroupRef& cgroup) override {
    return inner_->CgroupGone(cgroup);
  }
  absl::StatusOr<uint32_t> SwitchEgress(uint64_t id, const CompiledPhase& phase,
                                        uint16_t phase_index) override {
    return inner_->SwitchEgress(id, phase, phase_index);
  }
  std::string CutUnavailable() override { return inner_->CutUnavailable(); }
  absl::StatusOr<std::vector<CutConnection>> CutConnections(
      const CgroupRef& cgroup, int netns_fd) override {
    return inner_->CutConnections(cgroup, netns_fd);
  }
  absl::StatusOr<SandboxCounters> DetachEgress(uint64_t id) override {
    return inner_->DetachEgress(id);
  }
  absl::StatusOr<SandboxCounters> EgressCounters(uint64_t id) override {
    return inner_->EgressCounters(id);
  }
  absl::StatusOr<AdoptedSandbox> AdoptEgress(uint64_t id) override {
    return inner_->AdoptEgress(id);
  }
  std::string UnixUnavailable() const override {
    return inner_->UnixUnavailable();
  }
  absl::Status SetUnixTraits(uint64_t id, const UnixTraits& traits) override {
    return inner_->SetUnixTraits(id, traits);
  }
  bool CanBrokerUnix() const override { return inner_->CanBrokerUnix(); }
  absl::Status AllowBrokeredConnect(uint64_t cookie,
                                    uint64_t pid_tgid) override {
    return inner_->AllowBrokeredConnect(cookie, pid_tgid);
  }
  void ForgetBrokeredConnect(uint64_t cookie) override {
    inner_->ForgetBrokeredConnect(cookie);
  }
  absl::StatusOr<GuardInfo> PrepareGuard(GuardMode mode, bool spawns) override {
    return inner_->PrepareGuard(mode, spawns);
  }
  absl::Status AddGuard(const CgroupRef& cgroup, GuardMode mode) override {
    return inner_->AddGuard(cgroup, mode);
  }
  absl::StatusOr<uint64_t> RemoveGuard(uint64_t id) override {
    return inner_->RemoveGuard(id);
  }
  absl::Status AdoptGuard(uint64_t id) override {
    return inner_->AdoptGuard(id);
  }
  absl::StatusOr<uint64_t> GuardEventsLost(uint64_t id) override {
    return inner_->GuardEventsLost(id);
  }
  absl::Status Protect(const std::string& path) override {
    return inner_->Protect(path);
  }
  absl::Status StartDns(uint64_t id, const std::vector<HostPort>& upstreams,
                        std::function<void(const DnsQueryInfo&)> on_query,
                        int netns_fd) override {
    return inner_->StartDns(id, upstreams, std::move(on_query), netns_fd);
  }
  absl::Status SetDnsPhase(uint64_t id, const CompiledPhase& phase,
                           uint32_t generation) override {
    return inner_->SetDnsPhase(id, phase, generation);
  }
  void StopDns(uint64_t id) override { inner_->StopDns(id); }
  absl::StatusOr<size_t> DnsLearnedCount(uint64_t id) override {
    return inner_->DnsLearnedCount(id);
  }
  std::vector<DeadDriver> DeadDrivers() override {
    return inner_->DeadDrivers();
  }
  std::vector<OrphanSandbox> Orphans() override { return inner_->Orphans(); }
  absl::Status RecoverEvents(const DeadDriver& dead) override {
    return inner_->RecoverEvents(dead);
  }
  void ForgetDeadDriver(const DeadDriver& dead) override {
    inner_->ForgetDeadDriver(dead);
  }
  EventHub& events() override { return inner_->events(); }
  absl::StatusOr<int> PollEvents(int timeout_ms) override {
    return inner_->PollEvents(timeout_ms);
  }
  absl::StatusOr<int> DrainEvents() override { return inner_->DrainEvents(); }
  std::string EgressName() const override { return inner_->EgressName(); }
  std::string GuardStatus() override { return inner_->GuardStatus(); }
  std::vector<uint64_t> AllSandboxes() override {
    return inner_->AllSandboxes();
  }
  std::string PinRoot() const override { return inner_->PinRoot(); }

 private:
  static bool IsOpen(GatedEnforcement* self)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
    return !self->closed_;
  }

  std::unique_ptr<HostEnforcement> inner_;
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SANDBOX_GATED_ENFORCEMENT_H_
