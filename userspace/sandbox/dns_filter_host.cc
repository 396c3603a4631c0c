#include "sandbox/dns_filter_host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "dns/answer.h"
#include "dns/name_rules.h"
#include "egress/egress_abi.h"
#include "sandbox/netns.h"

namespace sandfence {
namespace {

constexpr uint32_t kTargetsPerSlot = 1u << 10;

uint64_t BootNowNs() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

IpAddress TargetAddress(uint32_t slot, uint32_t k) {
  return IpAddress::V4(SF_DNS_FILTER_NET | ((slot % 64) << 10) | k);
}

// A socket bound to target:53 (a listening one for TCP). EADDRINUSE comes
// back as AlreadyExists, so that the caller moves on to the next target.
absl::StatusOr<UniqueFd> Bind(const IpAddress& addr, int type) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket for the DNS filter");
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(SF_DNS_PORT);
  std::memcpy(&sa.sin_addr, addr.bytes(), 4);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    if (err == EADDRINUSE) return absl::AlreadyExistsError("in use");
    return ErrnoError(
        err, absl::StrCat("bind the DNS filter to ", addr.ToString(), ":53"));
  }
  if (type == SOCK_STREAM && ::listen(fd.get(), 256) != 0) {
    return ErrnoError(errno, "listen (DNS filter)");
  }
  return fd;
}

bool Learnable(const IpAddress& a) {
  if (a.IsUnspecified()) return false;
  if (!a.is_v4()) return true;
  uint32_t be;
  std::memcpy(&be, a.bytes(), 4);
  return (ntohl(be) & SF_DNS_FILTER_MASK) != SF_DNS_FILTER_NET;
}

}  // namespace

DnsFilterHost::~DnsFilterHost() {
  std::vector<std::unique_ptr<Server>> servers;
  {
    absl::MutexLock lock(&mu_);
    servers.swap(servers_);
    members_.clear();
  }
  for (auto& s : servers) {
    s->filter->Stop();
    if (s->thread.joinable()) s->thread.join();
  }
}

void DnsFilterHost::OnLoop(Server* server, const std::function<void()>& fn) {
  absl::Notification done;
  server->filter->loop()->Post([&] {
    fn();
    done.Notify();
  });
  done.WaitForNotification();
}

absl::StatusOr<DnsFilterHost::Server*> DnsFilterHost::ServerFor(
    const std::vector<HostPort>& upstreams) {
  for (auto& s : servers_) {
    if (s->upstreams == upstreams) return s.get();
  }
  auto server = std::make_unique<Server>();
  server->upstreams = upstreams;
  dns::FilterServerOptions options = options_;
  options.forwarder.servers = upstreams;
  Server* raw = server.get();
  dns::FilterHooks hooks;
  // The filter's thread asks; the listener it names is the only identity.
  hooks.identify =
      [this,
       raw](const dns::QueryOrigin& origin) -> std::optional<dns::SandboxId> {
    absl::MutexLock lock(&mu_);
    auto it = raw->owner.find(origin.listener);
    if (it == raw->owner.end()) return std::nullopt;
    return it->second;
  };
  hooks.learn = [this](const dns::LearnRequest& req) { return Learn(req); };
  hooks.outcome = [this](const dns::QueryOutcome& o) { Outcome(o); };
  absl::StatusOr<std::unique_ptr<dns::FilterServer>> filter =
      dns::FilterServer::Create(std::move(options), std::move(hooks));
  if (!filter.ok()) return filter.status();
  server->filter = *std::move(filter);
  server->thread = std::thread([raw] { raw->filter->Run().IgnoreError(); });
  servers_.push_back(std::move(server));
  return raw;
}

absl::StatusOr<HostPort> DnsFilterHost::AddSandbox(
    uint64_t cgroup_id, const std::vector<HostPort>& upstreams,
    OutcomeFn outcome, int netns_fd) {
  Server* server = nullptr;
  UniqueFd udp, tcp;
  IpAddress addr;
  {
    absl::MutexLock lock(&mu_);
    if (members_.contains(cgroup_id)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "sandbox ", cgroup_id, " has a DNS filter target already"));
    }
    absl::StatusOr<Server*> s = ServerFor(upstreams);
    if (!s.ok()) return s.status();
    server = *s;
    // In the sandbox's own namespace, the listeners are made there (its
    // loopback, where its redirected queries arrive); the filter serves
    // them from here, and asks the upstreams from the host's namespace.
    auto bind_target = [&]() -> absl::Status {
      if (netns_fd >= 0) {
        if (absl::Status up = EnsureLoopbackUp(); !up.ok()) {
          return absl::Status(
              up.code(), absl::StrCat("the sandbox's own network namespace: ",
                                      up.message()));
        }
      }
      for (uint32_t tries = 1; tries < kTargetsPerSlot; ++tries) {
        const uint32_t k = next_k_;
        next_k_ = next_k_ % (kTargetsPerSlot - 1) + 1;
        addr = TargetAddress(slot_, k);
        absl::StatusOr<UniqueFd> u = Bind(addr, SOCK_DGRAM);
        if (absl::IsAlreadyExists(u.status())) continue;
        if (!u.ok()) return u.status();
        absl::StatusOr<UniqueFd> t = Bind(addr, SOCK_STREAM);
        if (absl::IsAlreadyExists(t.status())) continue;
        if (!t.ok()) return t.status();
        udp = *std::move(u);
        tcp = *std::move(t);
        return absl::OkStatus();
      }
      return absl::OkStatus();
    };
    absl::Status bound =
        netns_fd >= 0 ? InNetns(netns_fd, bind_target) : bind_target();
    if (!bound.ok()) return bound;
    if (!udp) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "every DNS filter target of this process (", kTargetsPerSlot - 1,
          " in 127.83.0.0/16 for driver slot ", slot_, ") is in use"));
    }
    // Held by a member without listeners until they serve: no query can
    // be taken for it yet, and a second Add for the sandbox is refused.
    Member m;
    m.server = server;
    m.target = HostPort{addr, SF_DNS_PORT};
    m.outcome = std::move(outcome);
    members_[cgroup_id] = std::move(m);
  }
  // Without mu_: the loop's thread takes it to identify every query, and
  // waiting here for that thread with mu_ held would deadlock.
  absl::StatusOr<dns::ListenerId> u_id, t_id;
  OnLoop(server, [&] {
    u_id = server->filter->AdoptUdp(std::move(udp));
    t_id = server->filter->AdoptTcp(std::move(tcp));
  });
  if (!u_id.ok() || !t_id.ok()) {
    OnLoop(server, [&] {
      if (u_id.ok()) server->filter->CloseListener(*u_id);
      if (t_id.ok()) server->filter->CloseListener(*t_id);
    });
    absl::MutexLock lock(&mu_);
    members_.erase(cgroup_id);
    return !u_id.ok() ? u_id.status() : t_id.status();
  }
  absl::MutexLock lock(&mu_);
  server->owner[*u_id] = cgroup_id;
  server->owner[*t_id] = cgroup_id;
  Member& m = members_[cgroup_id];
  m.udp = *u_id;
  m.tcp = *t_id;
  return m.target;
}

absl::Status DnsFilterHost::SetPhase(uint64_t cgroup_id,
                                     const CompiledPhase& phase,
                                     uint32_t generation) {
  Server* server;
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(cgroup_id);
    if (it == members_.end()) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", cgroup_id, " has no DNS filter target"));
    }
    server = it->second.server;
  }
  if (!phase.dns_filtered) {
    server->filter->RemovePolicy(cgroup_id);
    return absl::OkStatus();
  }
  absl::StatusOr<dns::PhaseNameRules> rules =
      dns::PhaseNameRules::Build(phase.name_rules);
  if (!rules.ok()) {
    return absl::Status(rules.status().code(),
                        absl::StrCat("phase \"", phase.name, "\": DNS names: ",
                                     rules.status().message()));
  }
  auto policy = std::make_shared<dns::SandboxDnsPolicy>();
  policy->rules = *std::move(rules);
  policy->ttl.min = absl::Seconds(phase.dns_ttl.min_seconds);
  policy->ttl.max = absl::Seconds(phase.dns_ttl.max_seconds);
  policy->ttl.grace = absl::Seconds(phase.dns_ttl.grace_seconds);
  policy->budget = phase.dns_budget;
  policy->answers_may_point_at = phase.dns_answers_may_point_at;
  policy->phase = phase.name;
  policy->generation = generation;
  policy->audit_only = phase.audit_only;
  server->filter->SetPolicy(cgroup_id, std::move(policy));
  return absl::OkStatus();
}

void DnsFilterHost::RemoveSandbox(uint64_t cgroup_id) {
  Member m;
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(cgroup_id);
    if (it == members_.end()) return;
    m = std::move(it->second);
    members_.erase(it);
    m.server->owner.erase(m.udp);
    m.server->owner.erase(m.tcp);
  }
  m.server->filter->RemovePolicy(cgroup_id);
  OnLoop(m.server, [&] {
    m.server->filter->CloseListener(m.udp);
    m.server->filter->CloseListener(m.tcp);
  });
}

size_t DnsFilterHost::sandboxes() const {
  absl::MutexLock lock(&mu_);
  return members_.size();
}

absl::Status DnsFilterHost::Learn(const dns::LearnRequest& req) {
  const uint64_t boot_now = BootNowNs();
  const absl::Time now = absl::Now();
  std::vector<LearnedEntry> entries;
  for (const dns::LearnedAddress& a : req.addresses) {
    if (!Learnable(a.addr)) continue;
    const uint64_t expires =
        boot_now + static_cast<uint64_t>(std::max<int64_t>(
                       0, absl::ToInt64Nanoseconds(a.expires - now)));
    for (L4 protocol : {L4::kTcp, L4::kUdp}) {
      LearnedEntry e;
      e.addr = a.addr;
      e.protocol = protocol;
      e.expires_boot_ns = expires;
      for (const NameGrant& g : req.grants) {
        if (g.protocol == protocol)
          e.ranges.push_back({g.port_first, g.port_last});
      }
      if (!e.ranges.empty()) entries.push_back(std::move(e));
    }
  }
  if (entries.empty()) return absl::OkStatus();
  return learn_(req.sandbox, static_cast<uint32_t>(req.generation),
                std::move(entries));
}

void DnsFilterHost::Outcome(const dns::QueryOutcome& outcome) {
  if (!outcome.sandbox) return;  // an unknown listener: nobody to tell
  OutcomeFn fn;
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(*outcome.sandbox);
    if (it == members_.end()) return;
    fn = it->second.outcome;
  }
  if (fn) fn(outcome);
}

}  // namespace sandfence
