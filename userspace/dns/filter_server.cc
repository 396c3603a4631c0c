// FilterServer: who asks, what the phase allows, forwarding, learning
// before release, outcomes. The sockets are in filter_io.cc.
#include "dns/filter_server.h"

#include <algorithm>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "dns/filter_server_internal.h"

namespace sandfence::dns {
namespace {

std::string BlockText(const SandboxDnsPolicy& policy) {
  return absl::StrCat(
      "sandfence: blocked by the sandbox's network policy (phase \"",
      policy.phase, "\"): this name is not allowed");
}

// Whether only wildcard rules ("*.x") matched: the name's labels below the
// suffix are the asker's to choose.
bool OnlyWildcards(const NameMatch& match) {
  if (match.patterns.empty()) return false;
  for (const std::string& p : match.patterns) {
    if (!absl::StartsWith(p, "*.")) return false;
  }
  return true;
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllowed:
      return "allowed";
    case Verdict::kBlocked:
      return "blocked";
    case Verdict::kRefused:
      return "refused";
    case Verdict::kMalformed:
      return "malformed";
    case Verdict::kNotServed:
      return "not_served";
    case Verdict::kUpstreamFailed:
      return "upstream_failed";
    case Verdict::kLearnFailed:
      return "learn_failed";
    case Verdict::kRebinding:
      return "rebinding";
    case Verdict::kRateLimited:
      return "rate_limited";
    case Verdict::kWouldBlock:
      return "would_block";
    case Verdict::kOverBudget:
      return "over_budget";
  }
  return "unknown";
}

FilterServer::FilterServer(FilterServerOptions options, FilterHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

absl::StatusOr<std::unique_ptr<FilterServer>> FilterServer::Create(
    FilterServerOptions options, FilterHooks hooks) {
  if (!hooks.identify || !hooks.learn) {
    return Malformed("the DNS filter needs an identify and a learn hook");
  }
  auto server =
      absl::WrapUnique(new FilterServer(std::move(options), std::move(hooks)));
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  server->loop_ = *std::move(loop);
  // No upstream: allowed names get SERVFAIL (a defaulted FILTERED on a
  // host whose nameservers are unknown); blocked ones NXDOMAIN as ever.
  if (server->options_.forwarder.servers.empty()) return server;
  absl::StatusOr<std::unique_ptr<Forwarder>> fwd =
      Forwarder::Create(server->loop_.get(), server->options_.forwarder);
  if (!fwd.ok()) return fwd.status();
  server->forwarder_ = *std::move(fwd);
  return server;
}

FilterServer::~FilterServer() {
  forwarder_.reset();
  for (auto& [id, conn] : conns_) {
    loop_->CancelTimer(conn->idle_timer);
    loop_->Remove(conn->fd.get());
  }
  for (auto& [id, l] : listeners_) loop_->Remove(l->fd.get());
}

void FilterServer::SetPolicy(SandboxId sandbox,
                             std::shared_ptr<const SandboxDnsPolicy> p) {
  absl::MutexLock lock(&mu_);
  policies_[sandbox] = std::move(p);
}

void FilterServer::RemovePolicy(SandboxId sandbox) {
  absl::MutexLock lock(&mu_);
  policies_.erase(sandbox);
}

std::shared_ptr<const SandboxDnsPolicy> FilterServer::PolicyFor(SandboxId id) {
  absl::MutexLock lock(&mu_);
  auto it = policies_.find(id);
  return it == policies_.end() ? nullptr : it->second;
}

absl::Status FilterServer::Run() { return loop_->Run(); }
void FilterServer::Stop() { loop_->Stop(); }

void FilterServer::Drop(Reply& reply) {
  reply.outcome.replied = false;
  reply.outcome.latency = absl::Now() - reply.start;
  if (reply.transport == Transport::kTcp) ReleaseTcpSlot(reply.conn);
  if (hooks_.outcome) hooks_.outcome(reply.outcome);
}

bool FilterServer::OverRate(std::optional<SandboxId> sandbox, double rate) {
  if (rate <= 0) return false;
  // Bursts of two seconds' worth (at least the filter's own burst for its
  // own rate): a resolver asks A and AAAA of a few names at once.
  const double burst = rate == options_.max_queries_per_second
                           ? options_.query_burst
                           : 2 * rate;
  const absl::Time now = loop_->now();
  // Buckets idle long enough to be full again are forgotten now and then,
  // so that sandboxes that are gone cost no memory (a bucket refills in
  // two seconds at any rate; the filter's own in burst / rate).
  if (++queries_ % 4096 == 0) {
    const absl::Duration refill = std::max(
        absl::Seconds(2),
        absl::Seconds(options_.max_queries_per_second > 0
                          ? options_.query_burst /
                                options_.max_queries_per_second
                          : 0));
    absl::erase_if(buckets_, [&](const auto& kv) {
      return now - kv.second.last > refill;
    });
  }
  auto [it, inserted] =
      buckets_.try_emplace(sandbox.value_or(UINT64_MAX), Bucket{burst, now});
  Bucket& b = it->second;
  b.tokens = std::min(
      burst, b.tokens + absl::ToDoubleSeconds(now - b.last) * rate);
  b.last = now;
  if (b.tokens < 1) return true;
  b.tokens -= 1;
  return false;
}

absl::StatusOr<std::string> FilterServer::Rebinding(
    const SandboxDnsPolicy& policy, const NameMatch& match,
    const ChainAddresses& chain) {
  const Protect protect =
      OnlyWildcards(match) ? Protect::kHostAndPrivate : Protect::kHost;
  absl::StatusOr<absl::Span<const IpAddress>> host =
      host_addresses_.Get(absl::Now());
  if (!host.ok()) return host.status();
  std::string first;
  size_t count = 0;
  for (const AnswerAddress& a : chain.addresses) {
    std::optional<std::string> range = ProtectedRange(a.addr, *host, protect);
    if (!range) continue;
    const IpAddress addr = a.addr.Unmapped();
    if (std::any_of(policy.answers_may_point_at.begin(),
                    policy.answers_may_point_at.end(),
                    [&](const IpPrefix& p) { return p.Contains(addr); })) {
      continue;
    }
    if (count++ == 0) first = absl::StrCat(addr.ToString(), ", ", *range);
  }
  if (count == 0) return std::string();
  // The field first: the EDE text a client sees is cut at 200 characters.
  return absl::StrCat(
      "dns.answers_may_point_at does not hold ", first,
      count > 1 ? absl::StrCat(" (and ", count - 1, " more)") : "",
      "; the answer for ", chain.chain.empty() ? "" : chain.chain.front(),
      chain.chain.size() > 1
          ? absl::StrCat(" (through ", chain.chain.back(), ")")
          : "",
      " is refused whole, nothing of it opened");
}

std::optional<std::string> FilterServer::OverBudget(SandboxId sandbox,
                                                    const DnsBudget& budget,
                                                    absl::string_view name,
                                                    uint16_t type) {
  // Each reason leads with its field: the EDE text a client sees is cut
  // at 200 characters.
  if (name.size() > budget.max_wildcard_name_length) {
    return absl::StrCat("dns.budget.max_wildcard_name_length: the name has ",
                        name.size(), " characters, at most ",
                        budget.max_wildcard_name_length, " under a wildcard");
  }
  const absl::Time now = loop_->now();
  const absl::Duration window = absl::Seconds(budget.window_seconds);
  // Windows that are over cost nothing: forgotten now and then, so that
  // sandboxes that are gone leave nothing behind.
  if (++budget_checks_ % 4096 == 0) {
    absl::erase_if(budget_use_, [&](const auto& kv) {
      return now - kv.second.window_start >= kv.second.window;
    });
  }
  BudgetUse& use = budget_use_[sandbox];
  if (use.names.empty() || now - use.window_start >= window) {
    use.window_start = now;
    use.names.clear();
    use.bytes = 0;
  }
  use.window = window;
  // What a resolver asks for a host it will connect to (A, AAAA, HTTPS)
  // shares the name's entry; any other type is a question of its own, or
  // a name asked again could carry 16 bits out in its type every time.
  const std::string key =
      type == kTypeA || type == kTypeAaaa || type == kTypeHttps
          ? std::string(name)
          : absl::StrCat(name, "/", type);
  if (use.names.contains(key)) return std::nullopt;  // asked before: free
  const int64_t left_s =
      absl::ToInt64Seconds(use.window_start + window - now) + 1;
  if (use.names.size() >= budget.wildcard_names) {
    return absl::StrCat("dns.budget.wildcard_names: ", use.names.size(),
                        " distinct names (a type other than A, AAAA or HTTPS "
                        "counts apart) under wildcards per ",
                        budget.window_seconds, " s; new ones again in ", left_s,
                        " s");
  }
  if (use.bytes + name.size() > budget.wildcard_name_bytes) {
    return absl::StrCat(
        "dns.budget.wildcard_name_bytes: ", use.bytes, "+", name.size(),
        " characters of names under wildcards, "
        "at most ",
        budget.wildcard_name_bytes, " per ", budget.window_seconds,
        " s; new ones again in ", left_s, " s");
  }
  use.names.emplace(key);
  use.bytes += name.size();
  return std::nullopt;
}

void FilterServer::HandleQuery(const QueryOrigin& origin,
                               absl::string_view wire,
                               std::shared_ptr<Reply> reply) {
  QueryOutcome& out = reply->outcome;
  out.origin = origin;
  // Who asks comes from where the query arrived, never from its bytes.
  out.sandbox = hooks_.identify(origin);
  // The phase in force sets its sandbox's rate (dns.budget); an origin
  // without one has the filter's.
  std::shared_ptr<const SandboxDnsPolicy> policy =
      out.sandbox ? PolicyFor(*out.sandbox) : nullptr;
  double rate = options_.max_queries_per_second;
  if (policy != nullptr && policy->budget.queries_per_second > 0) {
    // The filter's rate is the host's ceiling; a phase may ask for less.
    rate = rate > 0 ? std::min<double>(rate, policy->budget.queries_per_second)
                    : policy->budget.queries_per_second;
  }
  if (OverRate(out.sandbox, rate)) {
    out.verdict = Verdict::kRateLimited;
    Drop(*reply);
    return;
  }
  absl::StatusOr<Message> parsed = ParseMessage(wire);
  if (!parsed.ok()) {
    out.verdict = Verdict::kMalformed;
    out.detail = std::string(parsed.status().message());
    if (std::optional<std::string> formerr = BuildFormErr(wire)) {
      Send(*reply, *std::move(formerr));
    } else {
      Drop(*reply);
    }
    return;
  }
  const Message& query = *parsed;
  if (!query.questions.empty()) {
    out.name = query.questions[0].name;
    out.type = query.questions[0].type;
  }
  if (reply->transport == Transport::kUdp) {
    reply->max_size = ClientUdpLimit(query);
  }
  if (std::optional<QueryProblem> problem = CheckQuery(query)) {
    out.verdict = Verdict::kNotServed;
    out.detail = problem->reason;
    if (problem->rcode) {
      Send(*reply, BuildResponse(query, *problem->rcode),
           static_cast<uint16_t>(*problem->rcode));
    } else {
      Drop(*reply);
    }
    return;
  }
  if (!out.sandbox) {
    out.verdict = Verdict::kRefused;
    out.detail = "no sandbox is served at this address";
    Send(*reply, BuildResponse(query, Rcode::kRefused,
                               Ede{EdeCode::kProhibited,
                                   "sandfence: this DNS filter address serves "
                                   "no sandbox"}));
    return;
  }
  if (policy == nullptr) {
    out.verdict = Verdict::kRefused;
    out.detail = "the sandbox has no DNS policy";
    Send(*reply,
         BuildResponse(query, Rcode::kRefused,
                       Ede{EdeCode::kProhibited,
                           "sandfence: the sandbox has no DNS policy"}));
    return;
  }
  out.phase = policy->phase;
  out.generation = policy->generation;
  NameMatch match = policy->rules.Match(query.questions[0].name);
  out.matched = match.patterns;
  // Audit only: a name the phase would block is answered as if allowed,
  // and every outcome of it says would_block.
  const bool would_block = match.grants.empty();
  if (would_block && !policy->audit_only) {
    out.verdict = Verdict::kBlocked;
    Send(*reply, BuildResponse(query, Rcode::kNxDomain,
                               Ede{EdeCode::kBlocked, BlockText(*policy)}));
    return;
  }
  // A name only a wildcard allows is the asker's to choose, so it can
  // carry data out: it is counted against the sandbox's budget before
  // anything leaves the host.
  if (!would_block && !policy->audit_only && OnlyWildcards(match)) {
    if (std::optional<std::string> why =
            OverBudget(*out.sandbox, policy->budget, query.questions[0].name,
                       query.questions[0].type)) {
      out.verdict = Verdict::kOverBudget;
      out.detail = *std::move(why);
      Send(*reply, BuildResponse(
                       query, Rcode::kRefused,
                       Ede{EdeCode::kProhibited,
                           absl::StrCat("sandfence: over the DNS budget "
                                        "(phase \"",
                                        policy->phase, "\"): ", out.detail)}));
      return;
    }
  }
  auto shared_query = std::make_shared<const Message>(*std::move(parsed));
  if (!forwarder_) {
    out.verdict = would_block ? Verdict::kWouldBlock : Verdict::kUpstreamFailed;
    out.detail =
        "no upstream resolver is known (the host's nameservers are not known "
        "and no --resolver or dns resolver is given)";
    Send(*reply, BuildResponse(*shared_query, Rcode::kServFail,
                               Ede{EdeCode::kNoReachableAuthority,
                                   absl::StrCat("sandfence: ", out.detail)}));
    return;
  }
  // The header bits and EDNS a client sets are its to choose too: for a
  // name only a wildcard allows, the upstream gets fixed ones (recursion
  // desired, EDNS without DO), so that a name asked again carries nothing
  // out in them. The client's own reply is built from its own query.
  Message upstream_query = *shared_query;
  if (OnlyWildcards(match)) {
    upstream_query.header.flags = kFlagRd;
    upstream_query.edns = Edns{};
  }
  absl::Status s = forwarder_->Forward(
      *out.sandbox, upstream_query,
      [this, reply, policy, shared_query, match = std::move(match)](
          absl::StatusOr<UpstreamAnswer> answer) mutable {
        OnUpstream(std::move(reply), std::move(policy), std::move(shared_query),
                   std::move(match), std::move(answer));
      });
  if (!s.ok()) {
    out.verdict = would_block ? Verdict::kWouldBlock : Verdict::kRefused;
    out.detail = std::string(s.message());
    Send(*reply, BuildResponse(*shared_query, Rcode::kRefused,
                               Ede{EdeCode::kOther,
                                   absl::StrCat("sandfence: ", s.message())}));
  }
}

void FilterServer::OnUpstream(std::shared_ptr<Reply> reply,
                              std::shared_ptr<const SandboxDnsPolicy> policy,
                              std::shared_ptr<const Message> query,
                              NameMatch match,
                              absl::StatusOr<UpstreamAnswer> answer) {
  QueryOutcome& out = reply->outcome;
  // Only an audit-only policy forwards a name no rule matched.
  const bool would_block = match.grants.empty();
  if (!answer.ok()) {
    out.verdict = would_block ? Verdict::kWouldBlock : Verdict::kUpstreamFailed;
    out.detail = std::string(answer.status().message());
    const EdeCode code = absl::IsDeadlineExceeded(answer.status())
                             ? EdeCode::kNoReachableAuthority
                             : EdeCode::kNetworkError;
    Send(*reply,
         BuildResponse(*query, Rcode::kServFail,
                       Ede{code, absl::StrCat("sandfence: ",
                                              answer.status().message())}));
    return;
  }
  const Question& q = query->questions[0];
  ChainAddresses chain = FollowChain(answer->message, q.name);
  std::optional<std::string> rebinding;
  if (!would_block) {
    absl::StatusOr<std::string> why = Rebinding(*policy, match, chain);
    if (!why.ok()) {
      out.verdict = Verdict::kUpstreamFailed;
      out.detail =
          absl::StrCat("the answer was not released: ", why.status().message());
      Send(*reply, BuildResponse(*query, Rcode::kServFail,
                                 Ede{EdeCode::kOther,
                                     absl::StrCat("sandfence: ", out.detail)}));
      return;
    }
    if (!why->empty()) rebinding = *std::move(why);
  }
  if (rebinding && !policy->audit_only) {
    out.verdict = Verdict::kRebinding;
    for (const AnswerAddress& a : chain.addresses) {
      out.addresses.push_back(a.addr);
    }
    out.detail = *std::move(rebinding);
    Send(*reply,
         BuildResponse(*query, Rcode::kRefused,
                       Ede{EdeCode::kBlocked,
                           absl::StrCat("sandfence: rebinding (phase \"",
                                        policy->phase, "\"): ", out.detail)}));
    return;
  }
  if (rebinding) {
    // Audit only: answered, nothing opened, reported as what enforcement
    // would have refused.
    for (const AnswerAddress& a : chain.addresses) {
      out.addresses.push_back(a.addr);
    }
    out.detail =
        absl::StrCat("audit only: phase \"", policy->phase,
                     "\" would refuse this answer as rebinding (", *rebinding,
                     "); answered, its addresses not "
                     "opened");
  } else if (would_block) {
    // Reported, never opened: connections to them are judged (and
    // reported as would-deny) by the rules.
    for (const AnswerAddress& a : chain.addresses) {
      out.addresses.push_back(a.addr);
    }
    out.detail = absl::StrCat("audit only: phase \"", policy->phase,
                              "\" would block this name; answered, its "
                              "addresses not opened");
  } else if (!chain.addresses.empty()) {
    LearnRequest req;
    req.sandbox = *out.sandbox;
    req.generation = policy->generation;
    req.phase = policy->phase;
    req.name = q.name;
    req.chain = chain.chain;
    req.grants = match.grants;
    const absl::Time now = absl::Now();
    for (const AnswerAddress& a : chain.addresses) {
      req.addresses.push_back(
          {a.addr, a.ttl, now + LearnedLifetime(a.ttl, policy->ttl)});
      out.addresses.push_back(a.addr);
    }
    if (absl::Status s = hooks_.learn(req); !s.ok()) {
      out.verdict = Verdict::kLearnFailed;
      out.detail = std::string(s.message());
      Send(*reply,
           BuildResponse(*query, Rcode::kServFail,
                         Ede{EdeCode::kOther,
                             "sandfence: the answer's addresses could not be "
                             "opened for this sandbox"}));
      return;
    }
  }
  absl::StatusOr<std::string> wire =
      RewriteAnswer(answer->wire, answer->message, *query,
                    ClientTtlCap(policy->ttl), reply->max_size);
  if (!wire.ok()) {
    out.verdict = would_block ? Verdict::kWouldBlock : Verdict::kUpstreamFailed;
    out.detail = std::string(wire.status().message());
    Send(*reply, BuildResponse(*query, Rcode::kServFail));
    return;
  }
  out.verdict =
      would_block || rebinding ? Verdict::kWouldBlock : Verdict::kAllowed;
  Send(*reply, *std::move(wire), answer->message.rcode());
}

}  // namespace sandfence::dns
