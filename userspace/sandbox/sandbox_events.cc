#include "sandbox/sandbox_events.h"

#include <cstring>

#include "dns/message.h"
#include "guard/guard_types.h"

namespace sandfence {
namespace {

// A kernel verdict as the stream says it.
std::string VerdictText(const NetEvent& e) {
  if (e.would_deny()) return "would_deny";
  return e.denied() ? "denied" : "allowed";
}

events::Process ProcessOf(const sf_guard_task& t) {
  events::Process p;
  p.pid = t.tgid;
  p.uid = t.uid;
  p.comm.assign(t.comm, strnlen(t.comm, sizeof(t.comm)));
  return p;
}

}  // namespace

SandboxEvents::SandboxEvents(std::shared_ptr<events::EventStream> stream,
                             std::string rollout_id)
    : stream_(std::move(stream)),
      rollout_id_(std::move(rollout_id)),
      clock_(stream_ ? BootClock::Capture() : BootClock(0)) {}

void SandboxEvents::Emit(events::Event& event) {
  event.rollout = rollout_id_;
  stream_->Emit(event);
}

std::string SandboxEvents::PhaseOf(uint32_t generation) const {
  absl::MutexLock lock(&mu_);
  auto it = phase_of_generation_.find(generation);
  return it != phase_of_generation_.end() ? it->second : current_phase_;
}

void SandboxEvents::PhaseApplied(const std::string& from,
                                 const std::string& phase,
                                 uint32_t generation) {
  if (!stream_) return;
  {
    absl::MutexLock lock(&mu_);
    phase_of_generation_[generation] = phase;
    current_phase_ = phase;
  }
  events::Event e;
  e.unix_ns = clock_.ToUnixNs(clock_.NowBootNs());
  e.kind = events::Kind::kPhase;
  e.verdict = "applied";
  e.phase = phase;
  e.from_phase = from;
  e.generation = generation;
  Emit(e);
}

void SandboxEvents::Ended(
    const std::string& phase,
    std::vector<std::pair<std::string, uint64_t>> losses) {
  if (!stream_) return;
  const int64_t now = clock_.ToUnixNs(clock_.NowBootNs());
  if (!losses.empty()) {
    events::Event loss;
    loss.unix_ns = now;
    loss.kind = events::Kind::kLoss;
    loss.verdict = "lost";
    loss.phase = phase;
    loss.reason = "decisions made but not reported (the record counts them)";
    loss.counts = std::move(losses);
    Emit(loss);
  }
  events::Event e;
  e.unix_ns = now;
  e.kind = events::Kind::kPhase;
  e.verdict = "applied";
  e.phase = phase;
  e.ended = true;
  e.reason = "the sandbox ended";
  Emit(e);
}

void SandboxEvents::Network(const NetEvent& n) {
  if (!stream_) return;
  events::Event e;
  e.unix_ns = clock_.ToUnixNs(n.boot_ns ? n.boot_ns : clock_.NowBootNs());
  e.phase = PhaseOf(n.generation);
  e.kind = n.is_unix() ? events::Kind::kUnix : events::Kind::kNetwork;
  e.verdict = VerdictText(n);
  e.reason = std::string(ReasonName(n.reason));
  e.process = {.pid = n.tgid, .uid = n.uid, .comm = n.comm};
  e.hook = std::string(HookName(n.hook));
  e.protocol = AttemptProtocol(n);
  if (n.is_unix()) {
    e.path = n.unix_name->ToString();
  } else if (HasDestination(n)) {
    e.address = n.addr;
    e.port = n.port;
  }
  Emit(e);
}

void SandboxEvents::Dns(const DnsQueryInfo& q) {
  if (!stream_) return;
  events::Event e;
  e.unix_ns = clock_.ToUnixNs(q.boot_ns ? q.boot_ns : clock_.NowBootNs());
  e.phase = PhaseOf(q.generation);
  e.kind = events::Kind::kDns;
  // The filter's verdicts ("allowed", "blocked", "malformed", ...): what
  // was not answered as asked is denied; the detail says which.
  e.verdict = q.verdict == "allowed" ? "allowed" : "denied";
  e.reason = q.detail.empty() ? q.verdict : absl::StrCat(q.verdict, ": ",
                                                        q.detail);
  e.name = q.name;
  e.query_type = dns::TypeName(q.type);
  e.rcode = q.replied ? dns::RcodeName(q.rcode) : "";
  e.answers = q.addresses;
  e.matched = q.matched;
  e.protocol = q.transport;
  Emit(e);
}

void SandboxEvents::Guard(const sf_guard_event& g, int64_t mono_to_unix_ns,
                          const std::string& layer) {
  if (!stream_) return;
  events::Event e;
  e.unix_ns = static_cast<int64_t>(g.ts_ns) + mono_to_unix_ns;
  {
    absl::MutexLock lock(&mu_);
    e.phase = current_phase_;
  }
  e.kind = events::Kind::kGuard;
  const std::string action(GuardActionName(g.action));
  e.verdict = action == "audited" ? "would_deny" : action;
  e.action = std::string(GuardWhatName(g.what));
  e.layer = layer;
  e.process = ProcessOf(g.actor);
  if (g.target.tgid != 0) e.target = ProcessOf(g.target);
  e.detail.assign(g.name, strnlen(g.name, sizeof(g.name)));
  Emit(e);
}

}  // namespace sandfence
