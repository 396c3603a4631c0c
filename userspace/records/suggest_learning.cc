// What `records suggest` learns of one phase from the records: the DNS
// names their answers gave, the model server, each attempt's grant (or why
// none is possible), and the grants that cover them.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compile/endpoint.h"
#include "compile/rules.h"
#include "compile/unix_name.h"
#include "dns/rebinding.h"
#include "egress/egress_abi.h"
#include "egress/net_event.h"
#include "policy/rollout_endpoints.h"
#include "records/suggest_internal.h"

namespace sandfence {
namespace suggest_internal {
namespace {

std::string ModelUrl(const v1::CompiledRule& rule) {
  std::string host = rule.origin().empty() ? rule.destination() : rule.origin();
  if (absl::StrContains(host, ':')) host = absl::StrCat("[", host, "]");
  return absl::StrCat("http://", host, ":", rule.port_first());
}

// The parent a wildcard would stand for ("x.test" of "a.x.test"), or ""
// where none may: a single-label parent would be a top-level domain.
std::string WildcardParent(const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return "";
  std::string parent = name.substr(dot + 1);
  if (parent.find('.') == std::string::npos) return "";
  return parent;
}

bool IsPolicyHostName(const std::string& name) {
  absl::StatusOr<std::string> n = NormalizeHostName(name);
  return n.ok() && *n == name && !IsLocalhostName(name);
}

}  // namespace

void PhaseLearning::LearnQueries() {
  for (size_t r = 0; r < records_.size(); ++r) {
    for (const v1::DnsQuery& q : records_[r].record.dns_query()) {
      if (q.phase() != name_) continue;
      dns_filtered_ = true;
      recorded_queries_.Add(q.count(), q.verdict() != "allowed", r);
      if (q.overflow() || q.name().empty()) {
        Note(q.overflow() ? "DNS queries in overflow entries: no name kept"
                          : "DNS questions that did not parse",
             q.count(), q.verdict() != "allowed", r);
        continue;
      }
      NameSeen& n = names_[q.name()];
      n.queries.Add(q.count(), q.verdict() != "allowed", r);
      n.types.insert(q.type_name().empty() ? absl::StrCat("TYPE", q.type())
                                           : q.type_name());
      n.verdicts.insert(q.verdict());
      for (const std::string& text : q.address()) {
        std::optional<IpAddress> a = IpAddress::Parse(text);
        if (!a) continue;
        answered_[r][a->Unmapped()].insert(q.name());
        // An answer that pointed at the host: opened in the recorded run
        // only by its dns.answers_may_point_at, which the suggestion must
        // keep; or refused as rebinding, which it names and does not grant.
        // (The recording host's own addresses are not known here.)
        std::optional<std::string> range = dns::ProtectedRange(*a, {});
        if (!range) continue;
        const std::string host = a->Unmapped().ToString();
        if (q.verdict() == "allowed") {
          point_at_[host].Add(q.count(), false, r);
        } else if (q.verdict() == "rebinding") {
          Note(absl::StrCat(q.name(), "'s answer pointed at ", host, ", ",
                            *range,
                            ", and was refused as rebinding; to open "
                            "it: dns { answers_may_point_at: ",
                            Quote(host), " }"),
               q.count(), true, r);
        }
      }
    }
  }
}

absl::Status PhaseLearning::LearnModel() {
  if (!options_.models.empty()) {
    for (const std::string& url : options_.models) {
      absl::StatusOr<Endpoint> ep = ParseEndpointUrl(url);
      if (!ep.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--model ", Quote(url), ": ", ep.status().message()));
      }
      model_urls_.insert(url);
      if (ep->host.is_name()) {
        model_.names.emplace_back(ep->host.name, ep->port);
      } else {
        model_.rules.push_back(Rule{L4::kTcp, ep->host.prefix, ep->port,
                                    ep->port, RuleSource::kModel, ""});
      }
    }
    model_from_ = "--model";
    return absl::OkStatus();
  }
  std::set<size_t> from;
  for (size_t r = 0; r < records_.size(); ++r) {
    for (const v1::PhasePolicy& p : records_[r].record.phase_policy()) {
      if (p.name() != name_) continue;
      for (const v1::CompiledRule& rule : p.rule()) {
        if (rule.source() != v1::RULE_SOURCE_MODEL) continue;
        absl::StatusOr<IpPrefix> dest = IpPrefix::Parse(rule.destination());
        if (!dest.ok() || rule.port_first() == 0 || rule.port_first() > 65535 ||
            rule.port_last() > 65535) {
          continue;  // not a rule any compiler wrote: nothing to learn
        }
        const std::string url = ModelUrl(rule);
        if (!ParseEndpointUrl(url).ok()) {
          continue;  // an origin no compiler wrote: nothing to learn
        }
        model_urls_.insert(url);
        model_.rules.push_back(Rule{
            rule.protocol() == "udp" ? L4::kUdp : L4::kTcp, *dest,
            static_cast<uint16_t>(rule.port_first()),
            static_cast<uint16_t>(rule.port_last()), RuleSource::kModel, ""});
        from.insert(r);
      }
    }
  }
  if (!from.empty()) {
    model_from_ = absl::StrCat("the records' model rules ", Tags(from));
  }
  return absl::OkStatus();
}

bool PhaseLearning::IsModel(size_t r, L4 protocol, const IpAddress& addr,
                            uint16_t port) const {
  const Rule probe{protocol, IpPrefix::Host(addr), port,
                   port,     RuleSource::kAllow,   ""};
  for (const Rule& rule : model_.rules) {
    if (RuleCovers(rule, probe)) return true;
  }
  if (protocol != L4::kTcp || model_.names.empty()) return false;
  auto rec = answered_.find(r);
  if (rec == answered_.end()) return false;
  auto names = rec->second.find(addr);
  if (names == rec->second.end()) return false;
  for (const auto& [name, model_port] : model_.names) {
    if (model_port == port && names->second.count(name) > 0) return true;
  }
  return false;
}

void PhaseLearning::LearnAttempt(size_t r, const v1::NetAttempt& a) {
  const bool denied = a.verdict() == v1::VERDICT_DENY;
  const uint64_t n = a.count();
  recorded_attempts_.Add(n, denied, r);
  const std::string& reason = a.reason();
  auto is = [&](sf_reason x) { return reason == ReasonName(x); };
  if (a.overflow()) {
    return Note("attempts in overflow entries: no destination kept", n, denied,
                r);
  }
  if (IsBudgetReason(reason)) {
    return Note(
        "attempts past the egress budget: the rules allowed them, "
        "no grant is missing",
        n, denied, r);
  }
  if (is(SF_REASON_NO_SANDBOX) || is(SF_REASON_TOO_DEEP)) {
    return Note(absl::StrCat("attempts judged \"", reason,
                             "\": no policy decides these"),
                n, denied, r);
  }
  if (a.hook() == HookName(SF_HOOK_SOCK_CREATE) || is(SF_REASON_SOCKET_TYPE) ||
      is(SF_REASON_PROTOCOL)) {
    return Note(absl::StrCat(a.socket_type(), " ", a.protocol(),
                             " sockets: a restricted phase creates only TCP "
                             "and UDP sockets"),
                n, denied, r);
  }
  if (a.protocol() == "unix") {
    if (is(SF_REASON_UNIX_OWN) || is(SF_REASON_UNIX_OWN_SOCKET) ||
        is(SF_REASON_UNIX_SCOPED)) {
      return Note("attempts to the sandbox's own Unix sockets: always allowed",
                  n, denied, r);
    }
    if (is(SF_REASON_UNIX_PROTECTED)) {
      return Note(absl::StrCat("attempts to sandfence's own socket ",
                               a.address(), ": never reachable"),
                  n, denied, r);
    }
    if (is(SF_REASON_UNIX_UNVERIFIABLE)) {
      return Note(
          absl::StrCat("attempts to ", a.address(),
                       ", a path the sandbox bound, that could not be checked "
                       "against the socket reached (a datagram sent to the "
                       "path, a connect from a shared socket or descriptor "
                       "table, or one that bypassed sandfence's supervisor "
                       "with an inet-sized address): use an abstract name, "
                       "connect a datagram socket before sending, sandfence "
                       "run, or a kernel with BPF LSM"),
          n, denied, r);
    }
    if (is(SF_REASON_UNIX_PEER_OUTSIDE)) {
      return Note(absl::StrCat("attempts through ", a.address(),
                               ", a name the sandbox bound, to a socket "
                               "outside it: not granted"),
                  n, denied, r);
    }
    // A name that led elsewhere (a link, a relative name, a rebound
    // name): listing the name would grant whatever it leads to next.
    if (is(SF_REASON_UNIX_OUTSIDE_SOCKET) &&
        !absl::StartsWith(a.reached(), absl::StrCat(a.address(), " "))) {
      return Note(absl::StrCat("attempts through ", a.address(), ", which led "
                               "to ", a.reached(), " outside the sandbox: "
                               "not granted (list the socket's own name if "
                               "it is meant to be reached)"),
                  n, denied, r);
    }
    if (a.address().find('\\') != std::string::npos ||
        !ParseUnixName(a.address()).ok()) {
      return Note(absl::StrCat("attempts to Unix name ", Quote(a.address()),
                               ": not a name a policy can list"),
                  n, denied, r);
    }
    unix_[a.address()].Add(n, denied, r);
    return;
  }
  L4 protocol;
  if (a.protocol() == "tcp") {
    protocol = L4::kTcp;
  } else if (a.protocol() == "udp") {
    protocol = L4::kUdp;
  } else {
    return Note(absl::StrCat(a.protocol(),
                             " attempts: a restricted phase allows TCP and "
                             "UDP only"),
                n, denied, r);
  }
  std::optional<IpAddress> parsed = IpAddress::Parse(a.address());
  if (!parsed || a.port() == 0 || a.port() > 65535) {
    return Note(absl::StrCat("attempts to ", Quote(a.address()), " port ",
                             a.port(), ": no address and port to grant"),
                n, denied, r);
  }
  const IpAddress addr = parsed->Unmapped();
  const uint16_t port = static_cast<uint16_t>(a.port());
  if (is(SF_REASON_DNS_FILTER_RANGE)) {
    return Note("attempts to the DNS filters' range: never reachable", n,
                denied, r);
  }
  if (port == SF_DNS_PORT) {
    if (is(SF_REASON_DNS_UNREDIRECTABLE)) {
      return Note(
          "unconnected IPv6 DNS datagrams: a DNS-filtered phase cannot "
          "redirect them",
          n, denied, r);
    }
    if (is(SF_REASON_DNS_REDIRECT) || is(SF_REASON_DNS_NO_TARGET)) {
      dns_filtered_ = true;
      return Note("DNS queries to port 53: the phase's DNS filter answers them",
                  n, denied, r);
    }
    resolvers_[HostPort{addr, port}].Add(n, denied, r);
    return;
  }
  if (is(SF_REASON_OWN_LOOPBACK)) {
    return Note(
        "attempts to the sandbox's own loopback (its own network namespace): "
        "allowed without a rule",
        n, denied, r);
  }
  if (IsModel(r, protocol, addr, port)) {
    model_attempts_.Add(n, denied, r);
    return;
  }
  destinations_[{static_cast<int>(protocol), addr, port}].Add(n, denied, r);
}

void PhaseLearning::BuildGrants() {
  for (const auto& [dest, seen] : destinations_) {
    const auto& [protocol, addr, port] = dest;
    std::set<std::string> names;
    for (size_t r : seen.records) {
      auto rec = answered_.find(r);
      if (rec == answered_.end()) continue;
      auto it = rec->second.find(addr);
      if (it == rec->second.end()) continue;
      for (const std::string& n : it->second) {
        if (IsPolicyHostName(n)) names.insert(n);
      }
    }
    std::vector<GrantKey> keys;
    if (names.empty()) {
      keys.push_back(GrantKey{true, "", addr, port, static_cast<L4>(protocol)});
    }
    for (const std::string& n : names) {
      keys.push_back(
          GrantKey{false, n, IpAddress(), port, static_cast<L4>(protocol)});
    }
    for (const GrantKey& key : keys) {
      GrantSeen& g = grants_[key];
      g.attempts.Merge(seen);
      g.reached.insert(addr);
    }
  }
  // Siblings with the same port and protocol: one wildcard.
  std::map<std::tuple<std::string, uint16_t, int>, std::vector<GrantKey>>
      siblings;
  for (const auto& [key, g] : grants_) {
    if (key.address) continue;
    std::string parent = WildcardParent(key.name);
    if (parent.empty()) continue;
    siblings[{parent, key.port, static_cast<int>(key.protocol)}].push_back(key);
  }
  for (const auto& [group, keys] : siblings) {
    if (keys.size() < 2) continue;
    GrantKey wildcard{false, absl::StrCat("*.", std::get<0>(group)),
                      IpAddress(), std::get<1>(group),
                      static_cast<L4>(std::get<2>(group))};
    GrantSeen merged;
    for (const GrantKey& key : keys) {
      const GrantSeen& g = grants_[key];
      merged.attempts.Merge(g.attempts);
      merged.reached.insert(g.reached.begin(), g.reached.end());
      merged.members.insert(key.name);
      grants_.erase(key);
    }
    grants_[wildcard] = std::move(merged);
  }
}

absl::Status PhaseLearning::Learn() {
  LearnQueries();
  if (absl::Status s = LearnModel(); !s.ok()) return s;
  for (size_t r = 0; r < records_.size(); ++r) {
    const v1::RolloutRecord& rec = records_[r].record;
    for (const v1::PhasePolicy& p : rec.phase_policy()) {
      if (p.name() != name_) continue;
      ran_as_.push_back(
          absl::StrCat(RecordTag(r), " ", AccessName(p.network_access())));
      if (p.has_dns_filter()) dns_filtered_ = true;
      if (p.audit_allowed() == v1::Audit::NO_ALLOWED) {
        warnings_.push_back(absl::StrCat(
            RecordTag(r),
            " recorded no allowed attempts here (audit none): what its rules "
            "allowed is not learned"));
      }
    }
    for (const v1::NetAttempt& a : rec.net_attempt()) {
      if (a.phase() == name_) LearnAttempt(r, a);
    }
  }
  BuildGrants();
  return absl::OkStatus();
}

}  // namespace suggest_internal
}  // namespace sandfence
