#include "sandbox/fake_enforcement.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status.h"

namespace sandfence::testing {

const char* FakeCallName(FakeCall call) {
  switch (call) {
    case FakeCall::kCreateCgroup:
      return "CreateCgroup";
    case FakeCall::kOpenCgroup:
      return "OpenCgroup";
    case FakeCall::kCgroupPath:
      return "CgroupPath";
    case FakeCall::kKillCgroup:
      return "KillCgroup";
    case FakeCall::kReleaseCgroup:
      return "ReleaseCgroup";
    case FakeCall::kAttachEgress:
      return "AttachEgress";
    case FakeCall::kSwitchEgress:
      return "SwitchEgress";
    case FakeCall::kDetachEgress:
      return "DetachEgress";
    case FakeCall::kEgressCounters:
      return "EgressCounters";
    case FakeCall::kAdoptEgress:
      return "AdoptEgress";
    case FakeCall::kPrepareGuard:
      return "PrepareGuard";
    case FakeCall::kAddGuard:
      return "AddGuard";
    case FakeCall::kRemoveGuard:
      return "RemoveGuard";
    case FakeCall::kAdoptGuard:
      return "AdoptGuard";
    case FakeCall::kGuardEventsLost:
      return "GuardEventsLost";
    case FakeCall::kProtect:
      return "Protect";
    case FakeCall::kRecoverEvents:
      return "RecoverEvents";
    case FakeCall::kDrainEvents:
      return "DrainEvents";
    case FakeCall::kStartDns:
      return "StartDns";
    case FakeCall::kSetDnsPhase:
      return "SetDnsPhase";
    case FakeCall::kStopDns:
      return "StopDns";
  }
  return "?";
}

// --- FakeKernel: scripting and inspection ---

void FakeKernel::FailNth(FakeCall call, int n, absl::Status status) {
  absl::MutexLock lock(&mu_);
  faults_.push_back(Fault{call, n - 1, std::move(status)});
}

void FakeKernel::OnCall(std::function<void(FakeCall, uint64_t)> observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

void FakeKernel::RemoveCgroupBehindOurBack(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = cgroups_.find(path);
  if (it != cgroups_.end()) it->second.removed = true;
}

CgroupRef FakeKernel::AddCgroup(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = cgroups_.find(path);
  if (it != cgroups_.end() && !it->second.removed) return it->second.ref;
  FakeCgroup cg;
  cg.ref.path = path;
  cg.ref.id = NewIdLocked();
  cg.ref.level =
      static_cast<uint32_t>(std::count(path.begin(), path.end(), '/'));
  cgroups_[path] = cg;
  return cg.ref;
}

void FakeKernel::PutEgress(uint64_t cgroup_id, const FakeEgress& egress) {
  absl::MutexLock lock(&mu_);
  egress_[cgroup_id] = egress;
  generation_ = std::max(generation_, egress.generation);
}

void FakeKernel::SetCounters(uint64_t cgroup_id,
                             const SandboxCounters& counters) {
  absl::MutexLock lock(&mu_);
  auto it = egress_.find(cgroup_id);
  if (it != egress_.end()) it->second.counters = counters;
}

void FakeKernel::PutGuard(uint64_t cgroup_id, GuardMode mode) {
  absl::MutexLock lock(&mu_);
  guarded_[cgroup_id] = mode;
  guard_loaded_ = true;
}

void FakeKernel::SetGuardLost(uint64_t cgroup_id, uint64_t lost) {
  absl::MutexLock lock(&mu_);
  guard_lost_[cgroup_id] = lost;
}

void FakeKernel::SetGuardEnforcer(Enforcer enforcer,
                                  std::string fallback_reason) {
  absl::MutexLock lock(&mu_);
  enforcer_ = enforcer;
  fallback_reason_ = std::move(fallback_reason);
}

void FakeKernel::AddDeadDriver(uint32_t slot, DriverKind kind, pid_t pid) {
  absl::MutexLock lock(&mu_);
  dead_.push_back(DeadDriver{slot, kind, pid});
  next_slot_ = std::max(next_slot_, slot + 1);
}

void FakeKernel::QueueForSlot(uint32_t slot, const NetEvent& event) {
  absl::MutexLock lock(&mu_);
  slot_events_[slot].push_back(event);
}

std::vector<std::string> FakeKernel::Calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int FakeKernel::CallCount(FakeCall call) const {
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(call);
  return it == counts_.end() ? 0 : it->second;
}

std::optional<FakeCgroup> FakeKernel::Cgroup(const std::string& path) const {
  absl::MutexLock lock(&mu_);
  auto it = cgroups_.find(path);
  if (it == cgroups_.end()) return std::nullopt;
  return it->second;
}

std::optional<FakeCgroup> FakeKernel::CgroupById(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [path, cg] : cgroups_) {
    if (cg.ref.id == id) return cg;
  }
  return std::nullopt;
}

std::optional<FakeEgress> FakeKernel::Egress(uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  auto it = egress_.find(cgroup_id);
  if (it == egress_.end()) return std::nullopt;
  return it->second;
}

std::map<uint64_t, FakeEgress> FakeKernel::AllEgress() const {
  absl::MutexLock lock(&mu_);
  return egress_;
}

std::optional<GuardMode> FakeKernel::Guarded(uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  auto it = guarded_.find(cgroup_id);
  if (it == guarded_.end()) return std::nullopt;
  return it->second;
}

std::optional<FakeDns> FakeKernel::Dns(uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  auto it = dns_.find(cgroup_id);
  if (it == dns_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> FakeKernel::Protected() const {
  absl::MutexLock lock(&mu_);
  return protected_;
}

std::vector<uint32_t> FakeKernel::ForgottenSlots() const {
  absl::MutexLock lock(&mu_);
  return forgotten_;
}

uint32_t FakeKernel::last_generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

// --- FakeKernel: internals ---

absl::Status FakeKernel::Enter(FakeCall call, uint64_t id) {
  std::function<void(FakeCall, uint64_t)> observer;
  absl::Status fault;
  {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat(FakeCallName(call), "(", id, ")"));
    ++counts_[call];
    observer = observer_;
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (it->call != call) continue;
      if (it->remaining-- == 0) {
        fault = it->status;
        faults_.erase(it);
        break;
      }
    }
  }
  if (observer) observer(call, id);
  return fault;
}

uint64_t FakeKernel::NewIdLocked() { return next_id_++; }

FakeCgroup* FakeKernel::FindLocked(uint64_t id) {
  for (auto& [path, cg] : cgroups_) {
    if (cg.ref.id == id && !cg.removed) return &cg;
  }
  return nullptr;
}

absl::StatusOr<CgroupRef> FakeKernel::HoldLocked(const std::string& path,
                                                 bool create) {
  auto it = cgroups_.find(path);
  const bool exists = it != cgroups_.end() && !it->second.removed;
  if (create) {
    if (exists) {
      return absl::AlreadyExistsError(
          absl::StrCat("sandbox cgroup ", path, " already exists"));
    }
    FakeCgroup cg;
    cg.ref.path = path;
    cg.ref.id = NewIdLocked();
    cg.ref.level =
        static_cast<uint32_t>(std::count(path.begin(), path.end(), '/'));
    cg.created = true;
    cg.holders = 1;
    cgroups_[path] = cg;
    return cg.ref;
  }
  if (!exists) {
    // A real directory the test named (the daemon inspects a borrowed
    // cgroup_path on disk first): its id is the kernel's, the inode.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::NotFoundError(absl::StrCat("no cgroup ", path));
    }
    FakeCgroup cg;
    cg.ref.path = path;
    cg.ref.id = st.st_ino;
    cg.ref.level =
        static_cast<uint32_t>(std::count(path.begin(), path.end(), '/'));
    it = cgroups_.insert_or_assign(path, cg).first;
  }
  ++it->second.holders;
  return it->second.ref;
}

// --- FakeEnforcement ---

FakeEnforcement::FakeEnforcement(std::shared_ptr<FakeKernel> kernel)
    : kernel_(std::move(kernel)) {
  absl::MutexLock lock(&kernel_->mu_);
  slot_ = kernel_->next_slot_++;
}

FakeEnforcement::~FakeEnforcement() {
  absl::MutexLock lock(&mu_);
  absl::MutexLock klock(&kernel_->mu_);
  for (const auto& [id, n] : held_) {
    if (FakeCgroup* cg = kernel_->FindLocked(id)) cg->holders -= n;
  }
}

void FakeEnforcement::Queue(const NetEvent& event) {
  absl::MutexLock lock(&mu_);
  net_queue_.push_back(event);
}

void FakeEnforcement::Queue(const sf_guard_event& event) {
  absl::MutexLock lock(&mu_);
  guard_queue_.push_back(event);
}

absl::StatusOr<CgroupRef> FakeEnforcement::CreateCgroup(
    const std::string& path) {
  if (absl::Status s = kernel_->Enter(FakeCall::kCreateCgroup, 0); !s.ok()) {
    return s;
  }
  absl::StatusOr<CgroupRef> ref;
  {
    absl::MutexLock klock(&kernel_->mu_);
    ref = kernel_->HoldLocked(path, /*create=*/true);
  }
  if (ref.ok()) {
    absl::MutexLock lock(&mu_);
    ++held_[ref->id];
  }
  return ref;
}

absl::StatusOr<CgroupRef> FakeEnforcement::OpenCgroup(const std::string& path) {
  if (absl::Status s = kernel_->Enter(FakeCall::kOpenCgroup, 0); !s.ok()) {
    return s;
  }
  absl::StatusOr<CgroupRef> ref;
  {
    absl::MutexLock klock(&kernel_->mu_);
    ref = kernel_->HoldLocked(path, /*create=*/false);
  }
  if (ref.ok()) {
    absl::MutexLock lock(&mu_);
    ++held_[ref->id];
  }
  return ref;
}

absl::StatusOr<std::string> FakeEnforcement::CgroupPath(uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kCgroupPath, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  FakeCgroup* cg = kernel_->FindLocked(cgroup_id);
  if (cg == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cgroup with id ", cgroup_id));
  }
  return cg->ref.path;
}

absl::Status FakeEnforcement::KillCgroup(uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kKillCgroup, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  FakeCgroup* cg = kernel_->FindLocked(cgroup_id);
  if (cg == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cgroup with id ", cgroup_id));
  }
  ++cg->kills;
  return absl::OkStatus();
}

std::string FakeEnforcement::CgroupGone(const CgroupRef& cgroup) {
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->cgroups_.find(cgroup.path);
  if (it == kernel_->cgroups_.end() || it->second.removed) {
    return absl::StrCat("the sandbox cgroup ", cgroup.path, " was removed");
  }
  if (it->second.ref.id != cgroup.id) {
    return absl::StrCat("the sandbox cgroup ", cgroup.path,
                        " was removed and another made at its path");
  }
  return "";
}

absl::Status FakeEnforcement::ReleaseCgroup(uint64_t cgroup_id, bool remove) {
  if (absl::Status s = kernel_->Enter(FakeCall::kReleaseCgroup, cgroup_id);
      !s.ok()) {
    return s;
  }
  bool held = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(cgroup_id);
    if (it != held_.end()) {
      held = true;
      if (--it->second == 0) held_.erase(it);
    }
  }
  absl::MutexLock klock(&kernel_->mu_);
  FakeCgroup* cg = kernel_->FindLocked(cgroup_id);
  if (cg == nullptr) return absl::OkStatus();  // gone already
  if (held) --cg->holders;
  if (remove) cg->removed = true;
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> FakeEnforcement::AttachEgress(
    uint64_t cgroup_id, const CompiledPhase& phase, uint16_t phase_index) {
  if (absl::Status s = kernel_->Enter(FakeCall::kAttachEgress, cgroup_id);
      !s.ok()) {
    return s;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!held_.contains(cgroup_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cgroup ", cgroup_id, " is not held by this process"));
    }
  }
  absl::MutexLock klock(&kernel_->mu_);
  if (kernel_->egress_.contains(cgroup_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup_id, " already has a sandbox entry"));
  }
  FakeEgress e;
  e.generation = ++kernel_->generation_;
  e.phase = phase_index;
  e.ring = static_cast<uint8_t>(slot_);
  e.audit_only = phase.audit_only;
  kernel_->egress_[cgroup_id] = e;
  return e.generation;
}

absl::StatusOr<uint32_t> FakeEnforcement::SwitchEgress(
    uint64_t cgroup_id, const CompiledPhase& phase, uint16_t phase_index) {
  if (absl::Status s = kernel_->Enter(FakeCall::kSwitchEgress, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->egress_.find(cgroup_id);
  if (it == kernel_->egress_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " has no sandbox entry"));
  }
  it->second.generation = ++kernel_->generation_;
  it->second.phase = phase_index;
  it->second.audit_only = phase.audit_only;
  return it->second.generation;
}

absl::StatusOr<SandboxCounters> FakeEnforcement::DetachEgress(
    uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kDetachEgress, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->egress_.find(cgroup_id);
  if (it == kernel_->egress_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " has no sandbox entry"));
  }
  const SandboxCounters counters = it->second.counters;
  kernel_->egress_.erase(it);
  return counters;
}

absl::StatusOr<SandboxCounters> FakeEnforcement::EgressCounters(
    uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kEgressCounters, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->egress_.find(cgroup_id);
  if (it == kernel_->egress_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " has no sandbox entry"));
  }
  return it->second.counters;
}

absl::StatusOr<AdoptedSandbox> FakeEnforcement::AdoptEgress(
    uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kAdoptEgress, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->egress_.find(cgroup_id);
  if (it == kernel_->egress_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " has no sandbox entry"));
  }
  it->second.ring = static_cast<uint8_t>(slot_);  // its events come here now
  AdoptedSandbox out;
  out.kernel.cgroup_id = cgroup_id;
  out.kernel.generation = it->second.generation;
  out.kernel.phase = it->second.phase;
  out.kernel.ring = it->second.ring;
  out.missing_hooks = it->second.missing_hooks;
  return out;
}

absl::StatusOr<GuardInfo> FakeEnforcement::PrepareGuard(GuardMode mode,
                                                        bool spawns) {
  if (absl::Status s = kernel_->Enter(FakeCall::kPrepareGuard, 0); !s.ok()) {
    return s;
  }
  if (mode == GuardMode::kOff) return GuardInfo{};
  absl::MutexLock klock(&kernel_->mu_);
  // The fake host confines nothing: landlock is refused as on a host
  // without Landlock, and auto falls to the BPF guard it has.
  if (mode == GuardMode::kLandlock) {
    return Rejected(
        "guard mode landlock: this host cannot confine processes (the fake "
        "enforcement has no Landlock)");
  }
  (void)spawns;
  if (mode == GuardMode::kLsm && kernel_->enforcer_ != Enforcer::kLsm) {
    return Rejected(absl::StrCat(
        "guard mode lsm: this host's process guard runs signal (lsm "
        "unavailable: ",
        kernel_->fallback_reason_, ")"));
  }
  kernel_->guard_loaded_ = true;
  GuardInfo info;
  info.enforcer = kernel_->enforcer_;
  if (info.enforcer != Enforcer::kLsm) {
    info.fallback_reason = kernel_->fallback_reason_;
  }
  return info;
}

absl::Status FakeEnforcement::StartDns(
    uint64_t cgroup_id, const std::vector<HostPort>& upstreams,
    std::function<void(const DnsQueryInfo&)> on_query, int netns_fd) {
  if (absl::Status s = kernel_->Enter(FakeCall::kStartDns, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  if (!kernel_->egress_.contains(cgroup_id)) {
    return absl::NotFoundError(
        absl::StrCat("sandbox ", cgroup_id, " is not attached"));
  }
  if (kernel_->dns_.contains(cgroup_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("sandbox ", cgroup_id, " has a DNS filter already"));
  }
  kernel_->dns_[cgroup_id] =
      FakeDns{upstreams, "", 0, std::move(on_query), netns_fd};
  return absl::OkStatus();
}

absl::Status FakeEnforcement::SetDnsPhase(uint64_t cgroup_id,
                                          const CompiledPhase& phase,
                                          uint32_t generation) {
  if (absl::Status s = kernel_->Enter(FakeCall::kSetDnsPhase, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->dns_.find(cgroup_id);
  if (it == kernel_->dns_.end()) {
    return absl::NotFoundError(
        absl::StrCat("sandbox ", cgroup_id, " has no DNS filter"));
  }
  it->second.phase = phase.dns_filtered ? phase.name : "";
  it->second.generation = generation;
  return absl::OkStatus();
}

void FakeEnforcement::StopDns(uint64_t cgroup_id) {
  kernel_->Enter(FakeCall::kStopDns, cgroup_id).IgnoreError();
  absl::MutexLock klock(&kernel_->mu_);
  kernel_->dns_.erase(cgroup_id);
}

absl::Status FakeEnforcement::AddGuard(const CgroupRef& cgroup,
                                       GuardMode mode) {
  if (absl::Status s = kernel_->Enter(FakeCall::kAddGuard, cgroup.id);
      !s.ok()) {
    return s;
  }
  if (mode == GuardMode::kOff || mode == GuardMode::kLandlock) {
    return absl::OkStatus();
  }
  absl::MutexLock klock(&kernel_->mu_);
  if (kernel_->guarded_.contains(cgroup.id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup.id, " is guarded already"));
  }
  kernel_->guarded_[cgroup.id] = mode;
  kernel_->guard_loaded_ = true;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FakeEnforcement::RemoveGuard(uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kRemoveGuard, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  kernel_->guarded_.erase(cgroup_id);
  auto lost = kernel_->guard_lost_.find(cgroup_id);
  const uint64_t n = lost == kernel_->guard_lost_.end() ? 0 : lost->second;
  kernel_->guard_lost_.erase(cgroup_id);
  return n;
}

absl::Status FakeEnforcement::AdoptGuard(uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kAdoptGuard, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  if (!kernel_->guarded_.contains(cgroup_id)) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not guarded"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FakeEnforcement::GuardEventsLost(uint64_t cgroup_id) {
  if (absl::Status s = kernel_->Enter(FakeCall::kGuardEventsLost, cgroup_id);
      !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  auto it = kernel_->guard_lost_.find(cgroup_id);
  return it == kernel_->guard_lost_.end() ? 0 : it->second;
}

absl::Status FakeEnforcement::Protect(const std::string& path) {
  if (absl::Status s = kernel_->Enter(FakeCall::kProtect, 0); !s.ok()) {
    return s;
  }
  absl::MutexLock klock(&kernel_->mu_);
  kernel_->protected_.push_back(path);
  return absl::OkStatus();
}

std::vector<DeadDriver> FakeEnforcement::DeadDrivers() {
  absl::MutexLock klock(&kernel_->mu_);
  return kernel_->dead_;
}

std::vector<OrphanSandbox> FakeEnforcement::Orphans() {
  absl::MutexLock klock(&kernel_->mu_);
  std::vector<OrphanSandbox> out;
  for (const auto& [id, e] : kernel_->egress_) {
    for (const DeadDriver& d : kernel_->dead_) {
      if (d.slot != e.ring) continue;
      OrphanSandbox o;
      o.egress.cgroup_id = id;
      o.egress.generation = e.generation;
      o.egress.phase = e.phase;
      o.egress.ring = e.ring;
      o.owner = d;
      o.guarded = kernel_->guarded_.contains(id);
      out.push_back(o);
    }
  }
  return out;
}

absl::Status FakeEnforcement::RecoverEvents(const DeadDriver& dead) {
  const uint32_t slot = dead.slot;
  if (absl::Status s = kernel_->Enter(FakeCall::kRecoverEvents, slot);
      !s.ok()) {
    return s;
  }
  std::vector<NetEvent> events;
  {
    absl::MutexLock klock(&kernel_->mu_);
    events = std::move(kernel_->slot_events_[slot]);
    kernel_->slot_events_.erase(slot);
  }
  for (const NetEvent& e : events) hub_.DispatchNet(e);
  return absl::OkStatus();
}

void FakeEnforcement::ForgetDeadDriver(const DeadDriver& forgotten) {
  const uint32_t slot = forgotten.slot;
  absl::MutexLock klock(&kernel_->mu_);
  auto& dead = kernel_->dead_;
  dead.erase(
      std::remove_if(dead.begin(), dead.end(),
                     [slot](const DeadDriver& d) { return d.slot == slot; }),
      dead.end());
  kernel_->forgotten_.push_back(slot);
}

bool FakeEnforcement::Queued() {
  return !net_queue_.empty() || !guard_queue_.empty();
}

int FakeEnforcement::Dispatch() {
  std::deque<NetEvent> net;
  std::deque<sf_guard_event> guard;
  {
    absl::MutexLock lock(&mu_);
    net.swap(net_queue_);
    guard.swap(guard_queue_);
  }
  for (const NetEvent& e : net) hub_.DispatchNet(e);
  for (const sf_guard_event& e : guard) hub_.DispatchGuard(e);
  return static_cast<int>(net.size() + guard.size());
}

absl::StatusOr<int> FakeEnforcement::PollEvents(int timeout_ms) {
  {
    // Waits like a poll on an empty ring, so that a polling thread does
    // not spin.
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &FakeEnforcement::Queued),
                         absl::Milliseconds(timeout_ms));
  }
  return Dispatch();
}

absl::StatusOr<int> FakeEnforcement::DrainEvents() {
  if (absl::Status s = kernel_->Enter(FakeCall::kDrainEvents, 0); !s.ok()) {
    return s;
  }
  return Dispatch();
}

std::string FakeEnforcement::GuardStatus() {
  absl::MutexLock klock(&kernel_->mu_);
  return std::string(EnforcerName(kernel_->enforcer_));
}

std::vector<uint64_t> FakeEnforcement::AllSandboxes() {
  absl::MutexLock klock(&kernel_->mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, e] : kernel_->egress_) ids.push_back(id);
  for (const auto& [id, m] : kernel_->guarded_) {
    if (!kernel_->egress_.contains(id)) ids.push_back(id);
  }
  return ids;
}

}  // namespace sandfence::testing
