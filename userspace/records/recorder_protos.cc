// What a record holds of the compiled policy, and back: phases, rules,
// verdicts and cut connections as the record's protos say them.
#include "records/recorder.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "compile/unix_name.h"

namespace sandfence {
namespace {

v1::RuleSource ToProto(RuleSource s) {
  switch (s) {
    case RuleSource::kModel:
      return v1::RULE_SOURCE_MODEL;
    case RuleSource::kTool:
      return v1::RULE_SOURCE_TOOL;
    case RuleSource::kAllow:
      return v1::RULE_SOURCE_ALLOW;
    case RuleSource::kDns:
      return v1::RULE_SOURCE_DNS;
  }
  return v1::RULE_SOURCE_UNSPECIFIED;
}

std::string L4Name(L4 p) { return p == L4::kUdp ? "udp" : "tcp"; }

RuleSource FromProto(v1::RuleSource s) {
  switch (s) {
    case v1::RULE_SOURCE_MODEL:
      return RuleSource::kModel;
    case v1::RULE_SOURCE_TOOL:
      return RuleSource::kTool;
    case v1::RULE_SOURCE_DNS:
      return RuleSource::kDns;
    default:
      return RuleSource::kAllow;
  }
}

}  // namespace

std::string RuleText(const Rule& rule) {
  std::string addr = rule.dest.ToString();
  if (!rule.dest.address().is_v4()) addr = absl::StrCat("[", addr, "]");
  std::string ports = rule.port_first == rule.port_last
                          ? absl::StrCat(rule.port_first)
                          : absl::StrCat(rule.port_first, "-", rule.port_last);
  return absl::StrCat(L4Name(rule.protocol), " ", addr, ":", ports);
}

v1::Verdict VerdictOf(sf_verdict verdict) {
  switch (verdict) {
    case SF_VERDICT_ALLOW:
      return v1::VERDICT_ALLOW;
    case SF_VERDICT_AUDIT_DENY:
      return v1::VERDICT_AUDIT_DENY;
    case SF_VERDICT_DENY:
      break;
  }
  return v1::VERDICT_DENY;
}

absl::StatusOr<CompiledPhase> FromPhasePolicy(const v1::PhasePolicy& p) {
  CompiledPhase phase;
  phase.name = p.name();
  phase.access = p.network_access();
  for (const v1::CompiledRule& r : p.rule()) {
    Rule rule;
    if (r.protocol() == "tcp") {
      rule.protocol = L4::kTcp;
    } else if (r.protocol() == "udp") {
      rule.protocol = L4::kUdp;
    } else {
      return Malformed(absl::StrCat("phase ", p.name(), ": rule protocol \"",
                                    r.protocol(), "\""));
    }
    absl::StatusOr<IpPrefix> dest = IpPrefix::Parse(r.destination());
    if (!dest.ok()) {
      return Malformed(absl::StrCat("phase ", p.name(), ": rule destination ",
                                    dest.status().message()));
    }
    if (r.port_first() > 65535 || r.port_last() > 65535 ||
        r.port_first() > r.port_last()) {
      return Malformed(absl::StrCat("phase ", p.name(), ": rule ports ",
                                    r.port_first(), "-", r.port_last()));
    }
    rule.dest = *dest;
    rule.port_first = static_cast<uint16_t>(r.port_first());
    rule.port_last = static_cast<uint16_t>(r.port_last());
    rule.source = FromProto(r.source());
    rule.origin = r.origin();
    phase.rules.push_back(std::move(rule));
  }
  for (const v1::DroppedGrant& d : p.dropped()) {
    phase.dropped.push_back(
        {d.url(), d.name(), d.reason(), FromProto(d.source())});
  }
  phase.loopback = p.loopback();
  phase.guard = p.guard();
  phase.audit_allowed = p.audit_allowed();
  phase.audit_only = p.audit_only() && phase.restricted();
  if (p.has_dns_filter()) {
    const v1::DnsFilterPolicy& d = p.dns_filter();
    phase.dns_filtered = true;
    for (const v1::NameRule& r : d.name_rule()) {
      NameRule rule{r.pattern(), {}, r.origin()};
      for (const v1::NameGrant& g : r.grant()) {
        if ((g.protocol() != "tcp" && g.protocol() != "udp") ||
            g.port_first() == 0 || g.port_first() > 65535 ||
            g.port_last() > 65535 || g.port_first() > g.port_last()) {
          return Malformed(absl::StrCat(
              "phase ", p.name(), ": name rule \"", r.pattern(), "\" grant ",
              g.protocol(), " ", g.port_first(), "-", g.port_last()));
        }
        rule.grants.push_back({g.protocol() == "tcp" ? L4::kTcp : L4::kUdp,
                               static_cast<uint16_t>(g.port_first()),
                               static_cast<uint16_t>(g.port_last())});
      }
      phase.name_rules.push_back(std::move(rule));
    }
    for (const std::string& u : d.upstream()) {
      absl::StatusOr<HostPort> hp = HostPort::Parse(u, 53);
      if (!hp.ok()) {
        return Malformed(absl::StrCat("phase ", p.name(), ": dns upstream \"",
                                      u, "\": ", hp.status().message()));
      }
      phase.dns_upstreams.push_back(*hp);
    }
    phase.dns_ttl = {d.min_ttl_seconds(), d.max_ttl_seconds(),
                     d.grace_seconds()};
    if (d.has_budget()) {
      phase.dns_budget = {d.budget().wildcard_names(),
                          d.budget().window_seconds(),
                          d.budget().max_wildcard_name_length(),
                          d.budget().wildcard_name_bytes(),
                          d.budget().queries_per_second()};
      // A record of a build before query rates: the default.
      if (phase.dns_budget.queries_per_second == 0) {
        phase.dns_budget.queries_per_second = DnsBudget{}.queries_per_second;
      }
    }
    for (const std::string& text : d.answers_may_point_at()) {
      absl::StatusOr<IpPrefix> prefix = IpPrefix::Parse(text);
      if (!prefix.ok()) {
        return Malformed(absl::StrCat("phase ", p.name(),
                                      ": dns answers_may_point_at \"", text,
                                      "\": ", prefix.status().message()));
      }
      phase.dns_answers_may_point_at.push_back(*prefix);
    }
  }
  if (p.has_unix()) {
    phase.unix_checked = p.unix().checked();
    phase.unix_unchecked = !p.unix().checked();
    for (const std::string& text : p.unix().allow()) {
      absl::StatusOr<UnixName> name = ParseUnixName(text);
      if (!name.ok()) {
        return Malformed(absl::StrCat("phase ", p.name(), ": unix allow ",
                                      name.status().message()));
      }
      phase.unix_names.push_back(*std::move(name));
    }
  }
  return phase;
}

v1::PhasePolicy ToPhasePolicy(const CompiledPhase& phase) {
  v1::PhasePolicy p;
  p.set_name(phase.name);
  p.set_network_access(phase.access);
  for (const Rule& r : phase.rules) {
    v1::CompiledRule* out = p.add_rule();
    out->set_protocol(L4Name(r.protocol));
    out->set_destination(r.dest.ToString());
    out->set_port_first(r.port_first);
    out->set_port_last(r.port_last);
    out->set_source(ToProto(r.source));
    out->set_origin(r.origin);
  }
  for (const DroppedGrant& d : phase.dropped) {
    v1::DroppedGrant* out = p.add_dropped();
    out->set_url(d.url);
    out->set_name(d.name);
    out->set_reason(d.reason);
    out->set_source(ToProto(d.source));
  }
  p.set_loopback(phase.loopback);
  p.set_guard(phase.guard);
  p.set_audit_allowed(phase.audit_allowed);
  p.set_audit_only(phase.audit_only);
  if (phase.dns_filtered) {
    v1::DnsFilterPolicy* d = p.mutable_dns_filter();
    for (const NameRule& r : phase.name_rules) {
      v1::NameRule* out = d->add_name_rule();
      out->set_pattern(r.pattern);
      out->set_origin(r.origin);
      for (const NameGrant& g : r.grants) {
        v1::NameGrant* og = out->add_grant();
        og->set_protocol(L4Name(g.protocol));
        og->set_port_first(g.port_first);
        og->set_port_last(g.port_last);
      }
    }
    for (const HostPort& hp : phase.dns_upstreams) {
      d->add_upstream(hp.ToString());
    }
    d->set_min_ttl_seconds(phase.dns_ttl.min_seconds);
    d->set_max_ttl_seconds(phase.dns_ttl.max_seconds);
    d->set_grace_seconds(phase.dns_ttl.grace_seconds);
    v1::DnsBudget* b = d->mutable_budget();
    b->set_wildcard_names(phase.dns_budget.wildcard_names);
    b->set_window_seconds(phase.dns_budget.window_seconds);
    b->set_max_wildcard_name_length(phase.dns_budget.max_wildcard_name_length);
    b->set_wildcard_name_bytes(phase.dns_budget.wildcard_name_bytes);
    b->set_queries_per_second(phase.dns_budget.queries_per_second);
    for (const IpPrefix& prefix : phase.dns_answers_may_point_at) {
      d->add_answers_may_point_at(prefix.ToString());
    }
  }
  if (phase.restricted() && (phase.unix_checked || phase.unix_unchecked)) {
    v1::UnixPolicy* u = p.mutable_unix();
    u->set_checked(phase.unix_checked);
    for (const UnixName& n : phase.unix_names) u->add_allow(n.ToString());
  }
  return p;
}

v1::CutConnection CutToProto(const CutConnection& c) {
  v1::CutConnection out;
  out.set_address(c.peer.ToString());
  out.set_port(c.port);
  out.set_protocol(ProtocolName(c.protocol));
  out.set_reason(std::string(ReasonName(c.reason)));
  if (c.destroy_errno != 0) out.set_error(std::strerror(c.destroy_errno));
  return out;
}

}  // namespace sandfence
