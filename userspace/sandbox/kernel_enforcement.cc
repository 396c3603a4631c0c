#include "sandbox/kernel_enforcement.h"

#include <time.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "confine/confine.h"
#include "confine/landlock.h"
#include "guard/guard_protect.h"
#include "host/bpf_lsm.h"

namespace sandfence {

absl::StatusOr<std::unique_ptr<KernelEnforcement>> KernelEnforcement::Create(
    const KernelEnforcementOptions& options) {
  std::unique_ptr<KernelEnforcement> k(new KernelEnforcement());
  absl::StatusOr<std::unique_ptr<HostState>> host =
      HostState::Open(options.host);
  if (!host.ok()) return host.status();
  k->host_ = *std::move(host);
  absl::StatusOr<std::unique_ptr<EgressController>> egress =
      EgressController::Create(k->host_.get(), options.egress);
  if (!egress.ok()) return egress.status();
  k->egress_ = *std::move(egress);
  absl::MutexLock lock(&k->source_mu_);
  absl::StatusOr<std::unique_ptr<KernelEventSource>> source =
      KernelEventSource::Create(&k->hub_, k->egress_->events_fd(), -1);
  if (!source.ok()) return source.status();
  k->source_ = *std::move(source);
  return k;
}

KernelEnforcement::~KernelEnforcement() {
  {
    // The filter's threads learn through the egress controller: they stop
    // first.
    absl::MutexLock lock(&dns_mu_);
    dns_.reset();
  }
  {
    // Held cgroups are let go, never removed here: a sandbox that outlives
    // this process (pinned) keeps its processes and its cgroup.
    absl::MutexLock lock(&cgroups_mu_);
    for (auto& [id, held] : cgroups_) held.cgroup.Release();
  }
  if (!host_ || !host_->pinned() || !egress_) return;
  // The last process out, with no sandbox left anywhere, detaches what runs
  // host-wide: nothing taxes system calls for nobody. The programs and maps
  // stay pinned, verified, for the next process (PinLayout).
  HostState::Lock lock = host_->Exclusive();
  absl::MutexLock guard_lock(&guard_mu_);
  GuardController* guard = PinnedGuard();
  if (host_->OthersAlive() || !egress_->KernelSandboxes().empty() ||
      (guard != nullptr && !guard->GuardedSandboxes().empty())) {
    return;
  }
  egress_->DetachHostProgs();
}

absl::StatusOr<CgroupRef> KernelEnforcement::CreateCgroup(
    const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string parent = path.substr(0, slash);
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", parent));
    }
  }
  absl::StatusOr<Cgroup> cg = Cgroup::Create(path);
  if (!cg.ok()) {
    if (absl::IsAlreadyExists(cg.status())) {
      return absl::AlreadyExistsError(
          absl::StrCat("sandbox cgroup ", path, " already exists"));
    }
    return cg.status();
  }
  return Hold(*std::move(cg));
}

CgroupRef KernelEnforcement::Hold(Cgroup cgroup) {
  const CgroupRef ref = cgroup.ref();
  absl::MutexLock lock(&cgroups_mu_);
  auto it = cgroups_.find(ref.id);
  if (it == cgroups_.end()) {
    it = cgroups_.emplace(ref.id, HeldCgroup{std::move(cgroup)}).first;
  } else {
    // A second holder keeps the first object (it may be the one that
    // created the cgroup); the extra one only closes its fd.
    cgroup.Release();
  }
  ++it->second.users;
  return ref;
}

absl::StatusOr<CgroupRef> KernelEnforcement::OpenCgroup(
    const std::string& path) {
  absl::StatusOr<Cgroup> cg = Cgroup::Open(path);
  if (!cg.ok()) return cg.status();
  return Hold(*std::move(cg));
}

absl::StatusOr<std::string> KernelEnforcement::CgroupPath(uint64_t cgroup_id) {
  {
    absl::MutexLock lock(&cgroups_mu_);
    auto it = cgroups_.find(cgroup_id);
    if (it != cgroups_.end()) return it->second.cgroup.path();
  }
  return CgroupPathOfId(cgroup_id);
}

absl::Status KernelEnforcement::KillCgroup(uint64_t cgroup_id) {
  absl::StatusOr<std::string> path = CgroupPath(cgroup_id);
  if (!path.ok()) return path.status();
  return KillCgroupProcesses(*path);
}

absl::Status KernelEnforcement::ReleaseCgroup(uint64_t cgroup_id,
                                              bool remove) {
  std::optional<Cgroup> held;
  {
    absl::MutexLock lock(&cgroups_mu_);
    auto it = cgroups_.find(cgroup_id);
    if (it != cgroups_.end()) {
      if (--it->second.users > 0) return absl::OkStatus();
      held.emplace(std::move(it->second.cgroup));
      cgroups_.erase(it);
    }
  }
  std::string path;
  if (held) {
    path = held->path();
    held->Release();
  } else if (remove) {
    absl::StatusOr<std::string> p = CgroupPathOfId(cgroup_id);
    if (!p.ok()) return absl::IsNotFound(p.status()) ? absl::OkStatus()
                                                     : p.status();
    path = *p;
  }
  if (!remove) return absl::OkStatus();
  return KillAndRemoveCgroup(path);
}

std::string KernelEnforcement::CgroupGone(const CgroupRef& cgroup) {
  struct stat st {};
  if (::stat(cgroup.path.c_str(), &st) != 0) {
    if (errno != ENOENT) return "";  // unreadable is not gone
    return absl::StrCat("the sandbox cgroup ", cgroup.path, " was removed");
  }
  // A cgroup's id is its directory's inode number.
  if (static_cast<uint64_t>(st.st_ino) != cgroup.id) {
    return absl::StrCat("the sandbox cgroup ", cgroup.path,
                        " was removed and another made at its path");
  }
  return "";
}

int KernelEnforcement::CgroupFd(uint64_t cgroup_id) {
  absl::MutexLock lock(&cgroups_mu_);
  auto it = cgroups_.find(cgroup_id);
  return it == cgroups_.end() ? -1 : it->second.cgroup.fd();
}

absl::StatusOr<uint32_t> KernelEnforcement::AttachEgress(
    uint64_t cgroup_id, const CompiledPhase& phase, uint16_t phase_index) {
  absl::MutexLock lock(&cgroups_mu_);
  auto it = cgroups_.find(cgroup_id);
  if (it == cgroups_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup ", cgroup_id, " is not held by this process"));
  }
  return egress_->AddSandbox(it->second.cgroup.fd(), it->second.cgroup.ref(), phase,
                             phase_index);
}

absl::StatusOr<uint32_t> KernelEnforcement::SwitchEgress(
    uint64_t cgroup_id, const CompiledPhase& phase, uint16_t phase_index) {
  return egress_->SwitchPhase(cgroup_id, phase, phase_index);
}

std::string KernelEnforcement::CutUnavailable() {
  return egress_->cut_unavailable();
}

absl::StatusOr<std::vector<CutConnection>> KernelEnforcement::CutConnections(
    const CgroupRef& cgroup, int netns_fd) {
  return egress_->CutConnections(cgroup, netns_fd);
}

absl::StatusOr<SandboxCounters> KernelEnforcement::DetachEgress(
    uint64_t cgroup_id) {
  return egress_->RemoveSandbox(cgroup_id);
}

absl::StatusOr<SandboxCounters> KernelEnforcement::EgressCounters(
    uint64_t cgroup_id) {
  return egress_->Counters(cgroup_id);
}

absl::StatusOr<AdoptedSandbox> KernelEnforcement::AdoptEgress(
    uint64_t cgroup_id) {
  return egress_->AdoptSandbox(cgroup_id);
}

GuardController* KernelEnforcement::guard() {
  absl::MutexLock lock(&guard_mu_);
  return guard_ ? &*guard_ : nullptr;
}

GuardController* KernelEnforcement::PinnedGuard() {
  if (guard_) return &*guard_;
  if (!host_->pinned()) return nullptr;
  // A guard attached to a sandbox (by any process of this build).
  if (!GuardAttachedOnHost(*host_)) return nullptr;
  absl::StatusOr<GuardController> g =
      GuardController::Create(host_.get(), GuardMode::kAuto);
  if (!g.ok()) return nullptr;
  guard_.emplace(*std::move(g));
  if (!GuardLoaded().ok()) return nullptr;
  return &*guard_;
}

absl::Status KernelEnforcement::GuardLoaded() {
  if (absl::Status s = RebuildEventSource(); !s.ok()) return s;
  if (host_->pinned()) {
    if (absl::Status s = guard_->Protect(host_->pin_root()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("protect the pins: ",
                                                 s.message()));
    }
  }
  for (const std::string& path : protected_) {
    if (absl::Status s = guard_->Protect(path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status KernelEnforcement::Protect(const std::string& path) {
  absl::MutexLock lock(&guard_mu_);
  if (guard_) {
    if (absl::Status s = guard_->Protect(path); !s.ok()) return s;
  } else if (absl::StatusOr<ProtectedChain> chain = ResolveProtected(path);
             !chain.ok()) {
    return chain.status();  // a bad path is an error now, not later
  }
  protected_.push_back(path);
  // A socket among them (the daemon's) is also a Unix name no sandbox may
  // connect to, whatever its policy lists: judged by the egress hooks with
  // or without a guard. Any other path is just a name nobody connects to.
  if (path.size() < SF_UNIX_NAME_MAX && !path.empty() && path[0] == '/') {
    if (absl::Status s = egress_->ProtectUnixName(UnixName{path, false});
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status KernelEnforcement::RebuildEventSource() {
  absl::MutexLock lock(&source_mu_);
  absl::StatusOr<std::unique_ptr<KernelEventSource>> source =
      KernelEventSource::Create(&hub_, egress_->events_fd(),
                                guard_ ? guard_->events_fd() : -1);
  if (!source.ok()) return source.status();
  // Whatever the old source had queued is read by the new one: both read
  // the same rings.
  source_ = *std::move(source);
  return absl::OkStatus();
}

namespace {

// Whether this host can confine the processes sandfence starts: probed by
// applying it in a short-lived child (about 10 ms), once per set (per boot
// and build: the answer is pinned with the other probes), else once per
// process.
const ConfineSupport& HostConfineSupport(const HostState& host) {
  static const ConfineSupport support = [&host] {
    std::optional<ConfineSupport> probed_here;
    const absl::Status cached = host.CachedProbe("confine", [&] {
      absl::StatusOr<ConfineSupport> probed = ProbeConfinement();
      if (!probed.ok()) return probed.status();
      probed_here = *probed;
      return probed->Usable();
    });
    if (probed_here) return *probed_here;
    // From the pinned answer: usable at the ABI this kernel reports now.
    ConfineSupport out;
    if (cached.ok()) {
      const confine::LandlockAbi abi = confine::ProbeLandlockAbi();
      out.landlock_abi = abi.version;
      out.landlock_errata = abi.errata;
      out.landlock_reason = abi.reason;
      out.seccomp_filter = true;
      out.applied = abi.version >= 1;
    } else {
      out.landlock_reason = std::string(cached.message());
    }
    return out;
  }();
  return support;
}

}  // namespace

absl::StatusOr<GuardInfo> KernelEnforcement::PrepareGuard(GuardMode mode,
                                                          bool spawns) {
  if (mode == GuardMode::kOff) return GuardInfo{};
  const ConfineSupport& confine = HostConfineSupport(*host_);
  GuardInfo info;
  if (!confine.usable()) {
    info.confine_unavailable = std::string(confine.Usable().message());
  }
  // Confinement stacks on any BPF guard where the driver starts processes.
  info.confined = spawns && confine.usable();
  if (mode == GuardMode::kLandlock) {
    if (!confine.usable()) {
      return Rejected(absl::StrCat(
          "guard mode landlock: this host cannot confine processes: ",
          info.confine_unavailable));
    }
    info.enforcer = Enforcer::kLandlock;
    return info;
  }
  if (mode == GuardMode::kAuto && info.confined) {
    if (absl::Status lsm = host_->BpfLsm(); !lsm.ok()) {
      // No BPF LSM: the kernel-enforced layer, not tracepoints that kill
      // after the fact and tax every system call on the host.
      info.enforcer = Enforcer::kLandlock;
      info.fallback_reason = std::string(lsm.message());
      return info;
    }
  }
  absl::MutexLock lock(&guard_mu_);
  if (!guard_) {
    absl::StatusOr<GuardController> made =
        GuardController::Create(host_.get(), mode);
    if (!made.ok()) return made.status();
    guard_.emplace(*std::move(made));
    if (absl::Status s = GuardLoaded(); !s.ok()) return s;
  }
  if (mode == GuardMode::kLsm && guard_->enforcer() != Enforcer::kLsm) {
    return Rejected(absl::StrCat(
        "guard mode lsm: this host's process guard runs ",
        guard_->enforcer_name(),
        guard_->fallback_reason().empty()
            ? ""
            : absl::StrCat(" (lsm unavailable: ", guard_->fallback_reason(),
                           ")")));
  }
  info.enforcer = guard_->enforcer();
  info.fallback_reason = guard_->fallback_reason();
  return info;
}

absl::Status KernelEnforcement::AddGuard(const CgroupRef& cgroup,
                                         GuardMode mode) {
  if (mode == GuardMode::kOff || mode == GuardMode::kLandlock) {
    return absl::OkStatus();
  }
  absl::StatusOr<GuardInfo> info = PrepareGuard(mode, /*spawns=*/false);
  if (!info.ok()) return info.status();
  absl::MutexLock lock(&guard_mu_);
  GuardedSandbox sandbox;
  sandbox.cgroup_id = cgroup.id;
  sandbox.level = cgroup.level;
  return guard_->AddSandbox(sandbox);
}

absl::StatusOr<uint64_t> KernelEnforcement::RemoveGuard(uint64_t cgroup_id) {
  absl::MutexLock lock(&guard_mu_);
  GuardController* guard = PinnedGuard();
  if (guard == nullptr) return 0;
  const uint64_t lost = guard->LostEvents(cgroup_id).value_or(0);
  absl::Status s = guard->RemoveSandbox(cgroup_id);
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  return lost;
}

absl::Status KernelEnforcement::AdoptGuard(uint64_t cgroup_id) {
  absl::MutexLock lock(&guard_mu_);
  GuardController* guard = PinnedGuard();
  if (guard == nullptr) {
    return absl::NotFoundError("no process guard is loaded on this host");
  }
  return guard->AdoptSandbox(cgroup_id);
}

absl::StatusOr<uint64_t> KernelEnforcement::GuardEventsLost(
    uint64_t cgroup_id) {
  absl::MutexLock lock(&guard_mu_);
  if (!guard_) return 0;
  return guard_->LostEvents(cgroup_id);
}

std::vector<DeadDriver> KernelEnforcement::DeadDrivers() {
  return host_->DeadDrivers();
}

std::vector<OrphanSandbox> KernelEnforcement::Orphans() {
  std::vector<OrphanSandbox> out;
  const std::vector<DeadDriver> dead = host_->DeadDrivers();
  if (dead.empty()) return out;
  std::vector<uint64_t> guarded;
  {
    absl::MutexLock lock(&guard_mu_);
    if (GuardController* g = PinnedGuard()) guarded = g->GuardedSandboxes();
  }
  for (const KernelSandbox& k : egress_->KernelSandboxes()) {
    for (const DeadDriver& d : dead) {
      if (d.slot != k.ring) continue;
      OrphanSandbox o;
      o.egress = k;
      o.owner = d;
      o.guarded = std::find(guarded.begin(), guarded.end(), k.cgroup_id) !=
                  guarded.end();
      out.push_back(o);
    }
  }
  return out;
}

absl::Status KernelEnforcement::RecoverEvents(const DeadDriver& dead) {
  // The rings are taken (fds of their own) while the slot is checked to
  // be the dead one's; they are drained after, without the host's lock.
  absl::StatusOr<UniqueFd> net = absl::NotFoundError("");
  absl::StatusOr<UniqueFd> guard = absl::NotFoundError("");
  {
    // guard_mu_ before the host's lock, as RemoveGuard takes them.
    absl::MutexLock guard_lock(&guard_mu_);
    HostState::Lock lock = host_->Exclusive();
    if (!host_->StillDead(dead)) return absl::OkStatus();
    net = egress_->RingOfSlot(dead.slot);
    if (GuardController* g = PinnedGuard()) guard = g->RingOfSlot(dead.slot);
  }
  if (!net.ok() && !guard.ok()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<KernelEventSource>> source =
      KernelEventSource::Create(&hub_, net.ok() ? net->get() : -1,
                                guard.ok() ? guard->get() : -1);
  if (!source.ok()) return source.status();
  return (*source)->Drain().status();
}

void KernelEnforcement::ForgetDeadDriver(const DeadDriver& dead) {
  // Under the host's lock from the check to the free: two processes that
  // both saw the driver dead must not both forget it, since between the
  // two a third may have taken the freed slot, and its rings would go.
  // guard_mu_ first, as RemoveGuard takes them.
  absl::MutexLock guard_lock(&guard_mu_);
  HostState::Lock lock = host_->Exclusive();
  if (!host_->StillDead(dead)) return;
  const uint32_t slot = dead.slot;
  // The deletes it had queued when it was killed (old phases' rules and
  // learned addresses): the slot is still its own, so the journal's
  // entries under it are its.
  egress_->FinishDeletesOf(slot);
  egress_->ClearSlot(slot);
  if (GuardController* g = PinnedGuard()) g->ClearSlot(slot);
  host_->FreeSlot(slot);
}

std::string KernelEnforcement::GuardStatus() {
  // Each layer as it is on this host, probed by loading or applying it
  // (once per set, i.e. per boot and build), never by reading the LSM list.
  const absl::Status lsm = host_->BpfLsm();
  const ConfineSupport& confine = HostConfineSupport(*host_);
  const absl::Status signal = host_->CachedProbe("signal_guard", [] {
    absl::StatusOr<std::unique_ptr<HostState>> scratch = HostState::Open({});
    if (!scratch.ok()) return scratch.status();
    return GuardController::Create(scratch->get(), GuardMode::kSignal)
        .status();
  });
  std::string attached;
  {
    absl::MutexLock lock(&guard_mu_);
    if (GuardController* g = PinnedGuard()) {
      attached = absl::StrCat("; attached now: ", g->enforcer_name());
    }
  }
  // First what a daemon rollout in auto mode gets (its processes are not
  // sandfence's to confine), then what `run` and `enter` get.
  const std::string daemon = lsm.ok()      ? "lsm"
                             : signal.ok() ? "signal"
                                           : "none";
  const std::string started = lsm.ok() && confine.usable() ? "lsm+landlock"
                              : lsm.ok()                  ? "lsm"
                              : confine.usable()          ? "landlock"
                                                          : daemon;
  return absl::StrCat(
      daemon, " for daemon rollouts, ", started,
      " for processes sandfence starts (run, enter); lsm: ",
      lsm.ok() ? "runs" : absl::StrCat("unavailable (", lsm.message(), ")"),
      "; landlock+seccomp: ",
      confine.usable()
          ? absl::StrCat("Landlock ABI ", confine.landlock_abi, " + seccomp")
          : absl::StrCat("unavailable (", confine.Usable().message(), ")"),
      "; signal: ",
      signal.ok() ? "loads (weaker: kills after the fact, taxes every "
                    "system call while attached)"
                  : absl::StrCat("cannot load (", signal.message(), ")"),
      attached);
}

std::vector<uint64_t> KernelEnforcement::AllSandboxes() {
  std::vector<uint64_t> ids;
  for (const KernelSandbox& k : egress_->KernelSandboxes()) {
    ids.push_back(k.cgroup_id);
  }
  absl::MutexLock lock(&guard_mu_);
  if (GuardController* g = PinnedGuard()) {
    for (uint64_t id : g->GuardedSandboxes()) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<int> KernelEnforcement::PollEvents(int timeout_ms) {
  CollectExpiredDns();
  absl::MutexLock lock(&source_mu_);
  return source_->Poll(timeout_ms);
}

void KernelEnforcement::CollectExpiredDns() {
  // Every few seconds: the kernel judges an expired address absent at
  // once; this only frees its map entry.
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t now = ts.tv_sec * 1000000000ll + ts.tv_nsec;
  int64_t next = next_collect_mono_ns_.load();
  if (now < next ||
      !next_collect_mono_ns_.compare_exchange_strong(next, now + 5000000000ll)) {
    return;
  }
  {
    absl::MutexLock lock(&dns_mu_);
    if (!dns_) return;
  }
  clock_gettime(CLOCK_BOOTTIME, &ts);
  egress_->CollectExpired(static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
                          ts.tv_nsec);
}

absl::Status KernelEnforcement::StartDns(
    uint64_t cgroup_id, const std::vector<HostPort>& upstreams,
    std::function<void(const DnsQueryInfo&)> on_query, int netns_fd) {
  DnsFilterHost* dns;
  {
    absl::MutexLock lock(&dns_mu_);
    if (!dns_) {
      dns_ = std::make_unique<DnsFilterHost>(
          host_->slot(), [this](uint64_t id, uint32_t generation,
                                std::vector<LearnedEntry> entries) {
            return egress_->Learn(id, generation, entries);
          });
    }
    dns = dns_.get();
  }
  absl::StatusOr<HostPort> target = dns->AddSandbox(
      cgroup_id, upstreams,
      [on_query = std::move(on_query)](const dns::QueryOutcome& o) {
        timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        DnsQueryInfo q;
        q.boot_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
                    ts.tv_nsec;
        q.generation = static_cast<uint32_t>(o.generation);
        q.name = o.name;
        q.type = o.type;
        q.verdict = dns::VerdictName(o.verdict);
        q.rcode = o.rcode;
        q.replied = o.replied;
        q.transport = o.origin.transport == dns::Transport::kTcp ? "tcp" : "udp";
        q.addresses = o.addresses;
        q.matched = absl::StrJoin(o.matched, ",");
        q.detail = o.detail;
        q.latency_ns = static_cast<uint64_t>(
            std::max<int64_t>(0, absl::ToInt64Nanoseconds(o.latency)));
        on_query(q);
      },
      netns_fd);
  if (!target.ok()) return target.status();
  if (absl::Status s = egress_->SetDnsTarget(cgroup_id, *target); !s.ok()) {
    dns->RemoveSandbox(cgroup_id);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> KernelEnforcement::DnsLearnedCount(
    uint64_t cgroup_id) {
  return egress_->LearnedCount(cgroup_id);
}

absl::Status KernelEnforcement::SetDnsPhase(uint64_t cgroup_id,
                                            const CompiledPhase& phase,
                                            uint32_t generation) {
  absl::MutexLock lock(&dns_mu_);
  if (!dns_) return absl::FailedPreconditionError("no DNS filter runs");
  return dns_->SetPhase(cgroup_id, phase, generation);
}

void KernelEnforcement::StopDns(uint64_t cgroup_id) {
  DnsFilterHost* dns;
  {
    absl::MutexLock lock(&dns_mu_);
    dns = dns_.get();
  }
  if (dns) dns->RemoveSandbox(cgroup_id);
}

absl::StatusOr<int> KernelEnforcement::DrainEvents() {
  absl::MutexLock lock(&source_mu_);
  return source_->Drain();
}

}  // namespace sandfence
