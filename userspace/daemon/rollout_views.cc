#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "daemon/log.h"
#include "daemon/rollout_internal.h"
#include "daemon/rollout_manager.h"
#include "egress/egress_abi.h"
#include "guard/guard_record.h"
#include "policy/policy_source.h"
#include "policy/rollout_endpoints.h"
#include "records/journal.h"
#include "records/merged_record.h"
#include "records/recorder.h"
#include "resolve/resolver.h"
#include "sandbox/kernel_enforcement.h"
#include "sandbox/reaper.h"
#include "sandfence/version.h"

namespace sandfence {

v1::ListRolloutsResponse RolloutManager::List() {
  v1::ListRolloutsResponse out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, view] : views_) *out.add_rollout() = view;
  }
  for (v1::RolloutSummary& s : *out.mutable_rollout()) {
    if (!s.borrowed_from().empty()) continue;
    if (absl::StatusOr<SandboxCounters> c =
            enforcement_->EgressCounters(s.cgroup_id());
        c.ok()) {
      s.set_allowed(c->allowed);
      s.set_denied(c->denied);
      s.set_would_deny(c->audit_denied);
    }
  }
  std::sort(out.mutable_rollout()->begin(), out.mutable_rollout()->end(),
            [](const v1::RolloutSummary& a, const v1::RolloutSummary& b) {
              return a.rollout_id() < b.rollout_id();
            });
  return out;
}

ManagerMetrics RolloutManager::Metrics() {
  ManagerMetrics m;
  std::vector<std::shared_ptr<Rollout>> rollouts;
  {
    absl::MutexLock lock(&mu_);
    m.rollouts_open = views_.size();
    for (const auto& [id, view] : views_) {
      m.audit_only_sandboxes += view.audit_only() ? 1 : 0;
    }
    for (const auto& [id, r] : rollouts_) rollouts.push_back(r);
  }
  for (const std::shared_ptr<Rollout>& r : rollouts) {
    ManagerMetrics::RolloutDns d;
    bool dns_filtered = false;
    uint64_t cgroup_id = 0;
    {
      // Read under the rollout's lock, which End holds while it retires the
      // rollout's counts: nothing is observed after that.
      absl::MutexLock rl(&r->mu);
      if (!r->open()) continue;
      cgroup_id = r->sandbox->cgroup().id;
      RolloutReading reading;
      // A borrowed sandbox's kernel counters are its owner's.
      if (!r->sandbox->borrowed()) {
        if (absl::StatusOr<SandboxCounters> c =
                enforcement_->EgressCounters(cgroup_id);
            c.ok()) {
          reading.events_lost = c->events_lost;
        }
      }
      if (r->sandbox->recorder() != nullptr) {
        const std::vector<CompiledPhase>& phases = r->sandbox->policy().phases;
        dns_filtered =
            std::any_of(phases.begin(), phases.end(),
                        [](const CompiledPhase& p) { return p.dns_filtered; });
        if (dns_filtered) {
          d.rollout_id = r->id();
          d.queries = r->sandbox->recorder()->dns_stats();
          reading.dns = d.queries;
        }
      }
      totals_.Observe(r->id(), reading);
    }
    if (!dns_filtered) continue;
    if (absl::StatusOr<size_t> n = enforcement_->DnsLearnedCount(cgroup_id);
        n.ok()) {
      d.learned = *n;
      m.dns_learned_total += *n;
    }
    m.dns.push_back(std::move(d));
  }
  std::sort(m.dns.begin(), m.dns.end(), [](const auto& a, const auto& b) {
    return a.rollout_id < b.rollout_id;
  });
  const RolloutReading sum = totals_.Sum();
  m.events_lost = sum.events_lost;
  m.dns_total = sum.dns;
  const HubCounts hub = enforcement_->events().counts();
  m.decode_errors = hub.net_decode_errors + hub.guard_decode_errors;
  m.rollouts_started = started_;
  m.rollouts_ended = ended_;
  m.rollouts_adopted = adopted_;
  m.decisions_allowed = allowed_;
  m.decisions_denied = denied_;
  m.phase_switches = switches_;
  m.refusals = refusals_;
  m.watch_events_missed = watch_missed_;
  m.calls_refused_from_sandboxes = refused_calls_;
  m.runs_reaped = reaped_;
  m.sandboxes_gone = gone_;
  return m;
}

v1::HealthResponse RolloutManager::Health() {
  v1::HealthResponse h;
  h.set_version(SANDFENCE_VERSION);
  h.set_libbpf_version(
      absl::StrCat(libbpf_major_version(), ".", libbpf_minor_version()));
  utsname u{};
  if (::uname(&u) == 0) h.set_kernel_release(u.release);
  h.set_egress(enforcement_->EgressName());
  const std::string guard = enforcement_->GuardStatus();
  h.set_guard(guard);
  if (absl::StartsWith(guard, "lsm")) h.add_kernel_feature("bpf_lsm");
  h.set_pin_dir(enforcement_->PinRoot());
  {
    absl::MutexLock lock(&mu_);
    h.set_open_rollouts(static_cast<uint32_t>(views_.size()));
    uint32_t adopted = 0;
    std::vector<std::string> audit_only;
    for (const auto& [id, v] : views_) {
      adopted += v.adopted() ? 1 : 0;
      if (v.audit_only()) audit_only.push_back(id);
    }
    h.set_adopted_rollouts(adopted);
    std::sort(audit_only.begin(), audit_only.end());
    h.set_audit_only_rollouts(static_cast<uint32_t>(audit_only.size()));
    for (const std::string& id : audit_only) h.add_audit_only_rollout(id);
  }
  h.add_kernel_feature("cgroup_sock_addr");
  h.add_kernel_feature("cgroup_skb");
  h.add_kernel_feature("ringbuf");
  if (!enforcement_->PinRoot().empty()) h.add_kernel_feature("bpffs_pinning");
  return h;
}

absl::StatusOr<uint64_t> RolloutManager::Watch(const std::string& rollout_id,
                                               EventSink sink) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  absl::StatusOr<OpenRollout> open = FindOpen(rollout_id);
  if (!open.ok()) return open.status();
  OpenRollout& r = *open;
  const uint64_t listener = r->sandbox->AddListener(SandboxListener{
      [this, sink, rollout_id](const NetEvent& e) {
        v1::RolloutEvent out;
        out.set_rollout_id(rollout_id);
        out.set_generation(e.generation);
        out.set_verdict(VerdictOf(e.verdict));
        out.set_reason(std::string(ReasonName(e.reason)));
        out.set_hook(std::string(HookName(e.hook)));
        out.set_protocol(AttemptProtocol(e));
        out.set_address(e.addr.ToString());
        out.set_port(e.port);
        out.set_pid(e.pid);
        out.set_tgid(e.tgid);
        out.set_command(e.comm);
        *out.mutable_time() = clock_.ToTimestamp(e.boot_ns);
        sink(out);
      },
      nullptr});
  absl::MutexLock lock(&watch_mu_);
  const uint64_t id = next_watch_id_++;
  watches_[id] = WatchEntry{r.shared(), listener};
  return id;
}

void RolloutManager::Unwatch(uint64_t watch_id) {
  WatchEntry entry;
  {
    absl::MutexLock lock(&watch_mu_);
    auto it = watches_.find(watch_id);
    if (it == watches_.end()) return;
    entry = std::move(it->second);
    watches_.erase(it);
  }
  absl::MutexLock rl(&entry.rollout->mu);
  if (entry.rollout->sandbox) {
    entry.rollout->sandbox->RemoveListener(entry.listener);
  }
}

bool RolloutManager::IsOpen(const std::string& rollout_id) {
  absl::MutexLock lock(&mu_);
  return views_.contains(rollout_id);
}

void RolloutManager::CountDecisions(Sandbox& sandbox) {
  sandbox.AddListener(SandboxListener{[this](const NetEvent& e) {
                                        (e.denied() ? denied_ : allowed_)
                                            .fetch_add(
                                                1, std::memory_order_relaxed);
                                      },
                                      nullptr});
}

}  // namespace sandfence
