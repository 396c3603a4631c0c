#include "compile/compiler.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "compile/content_hash.h"
#include "compile/rules.h"
#include "compile/unix_name.h"
#include "policy/validate.h"

namespace sandfence {
namespace {

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

// The same status class with a message that says where it happened.
absl::Status WithContext(const absl::Status& status, absl::string_view where) {
  absl::Status out(status.code(), absl::StrCat(where, ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

std::string ToolLabel(const v1::ToolGrant& tool) {
  if (tool.name().empty()) return absl::StrCat("tool ", Quote(tool.url()));
  return absl::StrCat("tool ", Quote(tool.name()), " (", tool.url(), ")");
}

std::vector<L4> ProtocolsOf(v1::Protocol protocol) {
  switch (protocol) {
    case v1::UDP:
      return {L4::kUdp};
    case v1::ANY:
      return {L4::kTcp, L4::kUdp};
    default:  // TCP, or unset: the common case of a TCP service
      return {L4::kTcp};
  }
}

void AddRules(const std::vector<IpPrefix>& prefixes,
              const std::vector<L4>& protocols, uint16_t port_first,
              uint16_t port_last, RuleSource source, const std::string& origin,
              std::vector<Rule>* rules) {
  for (L4 protocol : protocols) {
    for (const IpPrefix& prefix : prefixes) {
      rules->push_back(
          Rule{protocol, prefix, port_first, port_last, source, origin});
    }
  }
}

// Adds what a name opens to its rule (one rule per normalized pattern).
void AddNameRule(const std::string& pattern, const std::vector<L4>& protocols,
                 uint16_t port_first, uint16_t port_last,
                 const std::string& origin, std::vector<NameRule>* names) {
  auto it = std::find_if(names->begin(), names->end(),
                         [&](const NameRule& r) { return r.pattern == pattern; });
  if (it == names->end()) {
    names->push_back(NameRule{pattern, {}, origin});
    it = names->end() - 1;
  } else if (!absl::StrContains(it->origin, origin)) {
    absl::StrAppend(&it->origin, ",", origin);
  }
  for (L4 protocol : protocols) {
    NameGrant g{protocol, port_first, port_last};
    if (std::find(it->grants.begin(), it->grants.end(), g) == it->grants.end()) {
      it->grants.push_back(g);
    }
  }
  std::sort(it->grants.begin(), it->grants.end());
}

}  // namespace

PolicyCompiler::PolicyCompiler(
    Resolver* resolver, absl::StatusOr<std::vector<HostPort>> system_resolvers)
    : resolver_(resolver), system_resolvers_(std::move(system_resolvers)) {}

absl::StatusOr<CompiledPolicy> PolicyCompiler::Compile(
    const v1::PolicySet& policy, const RolloutEndpoints& endpoints,
    const CompileContext& context, absl::string_view only_phase) {
  v1::PolicySet effective = ApplyRolloutEndpoints(policy, endpoints);
  if (absl::Status s = ValidatePolicySet(effective); !s.ok()) return s;

  cache_.clear();
  CompiledPolicy out;
  out.name = effective.name();
  out.content_hash = PolicyContentHash(effective);
  out.cut_required = effective.on_switch() == v1::CUT_REQUIRED;
  out.egress_budget = {effective.egress_budget().connections(),
                       effective.egress_budget().bytes(),
                       effective.egress_budget().bytes_per_address()};
  for (const v1::Phase& phase : effective.phase()) {
    if (!only_phase.empty() && phase.name() != only_phase) continue;
    absl::StatusOr<CompiledPhase> compiled = CompilePhase(phase, context);
    if (!compiled.ok()) return compiled.status();
    // The policy set's enforce applies where the phase sets none.
    compiled->audit_only = AuditOnly(effective, phase);
    compiled->egress_budget = out.egress_budget;
    out.phases.push_back(*std::move(compiled));
  }
  if (out.phases.empty()) {
    return Malformed(absl::StrCat("policy ", Quote(effective.name()),
                                  " has no phase ", Quote(only_phase)));
  }
  return out;
}

absl::StatusOr<std::vector<IpAddress>> PolicyCompiler::Addresses(
    const std::string& name) {
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  absl::StatusOr<std::vector<IpAddress>> addrs;
  if (IsLocalhostName(name)) {
    addrs = std::vector<IpAddress>{*IpAddress::Parse("127.0.0.1"),
                                   *IpAddress::Parse("::1")};
  } else if (resolver_ == nullptr) {
    addrs = Unavailable("no resolver is configured");
  } else {
    addrs = resolver_->Resolve(name);
  }
  cache_.emplace(name, addrs);
  return addrs;
}

absl::StatusOr<PolicyCompiler::Reach> PolicyCompiler::ReachOf(
    const Host& host, const CompileContext& context,
    bool own_loopback_by_rules) {
  Reach reach;
  if (!host.is_name()) {
    reach.unreachable =
        UnreachableReason(host.prefix, context, own_loopback_by_rules);
    if (reach.unreachable.empty()) reach.prefixes.push_back(host.prefix);
    return reach;
  }
  absl::StatusOr<std::vector<IpAddress>> addrs = Addresses(host.name);
  // The resolver's messages name the name and the server asked.
  if (!addrs.ok()) return addrs.status();
  std::string first_reason;
  for (const IpAddress& addr : *addrs) {
    IpPrefix prefix = IpPrefix::Host(addr.Unmapped());
    // Addresses the sandbox cannot reach are left out even when others
    // remain: a rule for 0.0.0.0 would open the local host.
    std::string why = UnreachableReason(prefix, context, own_loopback_by_rules);
    if (why.empty()) {
      reach.prefixes.push_back(prefix);
    } else if (first_reason.empty()) {
      first_reason = std::move(why);
    }
  }
  if (reach.prefixes.empty()) {
    reach.unreachable =
        addrs->empty()
            ? absl::StrCat(Quote(host.name), " has no address")
            : absl::StrCat(Quote(host.name),
                           " resolves only to addresses the sandbox cannot "
                           "reach: ",
                           first_reason);
  }
  return reach;
}

absl::StatusOr<CompiledPhase> PolicyCompiler::CompilePhase(
    const v1::Phase& phase, const CompileContext& context) {
  const std::string label = PhaseLabel(phase.name());
  // A refusal of `field` (`value`) of this phase, for programs as well as
  // people (common/status.h).
  const auto about = [&](absl::Status s, absl::string_view field,
                         absl::string_view value, absl::string_view reason) {
    return WithSubject(std::move(s),
                       {phase.name(), std::string(field), std::string(value),
                        std::string(reason)});
  };
  // A refusal from a parser, with where it was found in front.
  const auto within = [&](const absl::Status& s, absl::string_view where,
                          absl::string_view field, absl::string_view value) {
    return about(WithContext(s, where), field, value, s.message());
  };
  CompiledPhase out;
  out.name = phase.name();
  out.access = phase.network_access();
  out.loopback = phase.loopback();
  out.guard = phase.guard().mode() == v1::Guard::MODE_UNSPECIFIED
                  ? v1::Guard::AUTO
                  : phase.guard().mode();
  out.guard_allow_io_uring = phase.guard().allow_io_uring();
  out.guard_deny_ptrace = phase.guard().deny_ptrace();
  out.audit_allowed = phase.audit().allowed() == v1::Audit::ALLOWED_UNSPECIFIED
                          ? v1::Audit::FIRST_PER_DESTINATION
                          : phase.audit().allowed();
  out.audit_only = phase.enforce() == v1::AUDIT && out.restricted();

  // Everything is parsed before anything is judged: malformed input is
  // reported as such whatever the mode would have done with it, inherit
  // phases included (a typo is a typo even where it has no effect yet).
  std::vector<Endpoint> models;
  for (const std::string& url : phase.model()) {
    absl::StatusOr<Endpoint> ep = ParseEndpointUrl(url);
    if (!ep.ok()) {
      return within(ep.status(), absl::StrCat(label, ": model ", Quote(url)),
                    "model", url);
    }
    models.push_back(*std::move(ep));
  }
  const v1::Dns::Mode dns_mode = EffectiveDnsMode(phase);
  const bool filtered = dns_mode == v1::Dns::FILTERED;
  // Each tool's endpoint, or (a wildcard host) its name pattern and port.
  std::vector<ToolEndpoint> tools;
  for (const v1::ToolGrant& tool : phase.tool()) {
    absl::StatusOr<ToolEndpoint> ep = ParseToolUrl(tool.url());
    if (!ep.ok()) {
      return within(ep.status(), absl::StrCat(label, ": ", ToolLabel(tool)),
                    "tool", tool.url());
    }
    if (ep->pattern && !filtered) {
      const std::string reason =
          "a wildcard needs dns { mode: FILTERED } (the filter learns the "
          "addresses of the names it answers; without it a wildcard opens "
          "nothing)";
      return about(
          Malformed(absl::StrCat(label, ": ", ToolLabel(tool), ": ", reason)),
          "tool", tool.url(), reason);
    }
    tools.push_back(*std::move(ep));
  }
  // Each allow rule's host, or (a wildcard) its name pattern.
  std::vector<Host> allow_hosts;
  std::vector<std::optional<NamePattern>> allow_patterns;
  for (const v1::AllowRule& rule : phase.allow()) {
    const std::string where = absl::StrCat(label, ": allow ", Quote(rule.host()));
    absl::StatusOr<AllowHost> parsed = ParseAllowHost(rule.host());
    if (!parsed.ok()) {
      return within(parsed.status(), where, "allow", rule.host());
    }
    if (parsed->pattern) {
      if (!filtered) {
        const std::string reason =
            "a wildcard needs dns { mode: FILTERED } (the filter learns "
            "the addresses of the names it answers; without it a wildcard "
            "opens nothing)";
        return about(Malformed(absl::StrCat(where, ": ", reason)), "allow",
                     rule.host(), reason);
      }
      allow_hosts.push_back(Host{});
      allow_patterns.push_back(*std::move(parsed->pattern));
      continue;
    }
    allow_hosts.push_back(std::move(parsed->host));
    allow_patterns.push_back(std::nullopt);
  }

  // Unix sockets: checked in every restricted phase unless it says not.
  std::vector<UnixName> unix_names;
  for (const std::string& text : phase.unix().allow()) {
    absl::StatusOr<UnixName> name = ParseUnixName(text);
    if (!name.ok()) {
      return within(name.status(), absl::StrCat(label, ": unix.allow"),
                    "unix.allow", text);
    }
    if (std::find(unix_names.begin(), unix_names.end(), *name) ==
        unix_names.end()) {
      unix_names.push_back(*std::move(name));
    }
  }
  const bool unix_unchecked = phase.unix().mode() == v1::Unix::UNCHECKED;
  if (!out.restricted() &&
      (phase.unix().mode() != v1::Unix::MODE_UNSPECIFIED ||
       !unix_names.empty())) {
    const std::string reason =
        "is given on an inherit phase; inherit restricts nothing, so every "
        "Unix socket is reachable (give it to a model_only or "
        "model_and_tools phase)";
    return about(Malformed(absl::StrCat(label, ": unix ", reason)), "unix", "",
                 reason);
  }
  if (unix_unchecked && !unix_names.empty()) {
    const std::string reason =
        "with mode UNCHECKED, which reaches every Unix socket anyway; drop one";
    return about(Malformed(absl::StrCat(label, ": unix.allow ",
                                        Quote(unix_names.front().ToString()),
                                        " ", reason)),
                 "unix.allow", unix_names.front().ToString(), reason);
  }

  if (!out.restricted()) return out;  // inherit: nothing to resolve
  out.unix_checked = !unix_unchecked;
  out.unix_unchecked = unix_unchecked;
  out.unix_names = std::move(unix_names);

  const std::string mode(AccessName(phase.network_access()));
  if (context.borrowed) {
    const std::string reason =
        "cannot be enforced on a borrowed sandbox: it keeps its owner's "
        "network, so only inherit is allowed";
    return about(Rejected(absl::StrCat(label, ": network_access ", mode, " ",
                                       reason)),
                 "network_access", mode, reason);
  }

  if (models.empty()) {
    const std::string reason =
        "needs the model server's endpoint, and none is given; add model: "
        "\"http://HOST:PORT/...\" to the phase, or give it per rollout "
        "(--model URL)";
    return about(Rejected(absl::StrCat(label, ": network_access ", mode, " ",
                                       reason)),
                 "network_access", mode, reason);
  }
  if (phase.network_access() == v1::MODEL_ONLY) {
    for (const v1::ToolGrant& tool : phase.tool()) {
      if (tool.required()) {
        const std::string reason =
            "is required, but model_only allows only the model server";
        return about(Rejected(absl::StrCat(label, ": ", ToolLabel(tool), " ",
                                           reason)),
                     "tool", tool.url(), reason);
      }
    }
  }

  std::vector<Rule> rules;
  std::vector<NameRule> names;  // kept only when DNS is filtered
  // The model server: always required.
  for (size_t i = 0; i < models.size(); ++i) {
    const Endpoint& ep = models[i];
    std::string where = absl::StrCat(label, ": model ", Quote(phase.model(i)));
    absl::StatusOr<Reach> reach = ReachOf(ep.host, context, false);
    if (!reach.ok()) {
      return within(reach.status(), where, "model", phase.model(i));
    }
    if (reach->prefixes.empty()) {
      const std::string reason =
          absl::StrCat("cannot be reached: ", reach->unreachable,
                       "; the model server is always required");
      return about(Rejected(absl::StrCat(where, " ", reason)), "model",
                   phase.model(i), reason);
    }
    AddRules(reach->prefixes, {L4::kTcp}, ep.port, ep.port, RuleSource::kModel,
             ep.host.ToString(), &rules);
    if (ep.host.is_name()) {
      AddNameRule(ep.host.name, {L4::kTcp}, ep.port, ep.port, "model", &names);
    }
  }

  // Tool grants.
  for (size_t i = 0; i < tools.size(); ++i) {
    const v1::ToolGrant& tool = phase.tool(i);
    const Endpoint& ep = tools[i].endpoint;
    auto drop = [&](std::string reason) {
      out.dropped.push_back(DroppedGrant{tool.url(), tool.name(),
                                         std::move(reason), RuleSource::kTool});
    };
    if (phase.network_access() == v1::MODEL_ONLY) {
      drop("model_only drops optional tool grants");
      continue;
    }
    // any_port: the seed's host rule, every TCP port; its origin says so
    // wherever the rule is shown, since the URL alone says one port.
    const uint16_t first = tool.any_port() ? 1 : ep.port;
    const uint16_t last = tool.any_port() ? 65535 : ep.port;
    const std::string wider = tool.any_port() ? " (any port)" : "";
    const std::string origin = absl::StrCat(
        tool.name().empty() ? "tool" : absl::StrCat("tool:", tool.name()),
        wider);
    if (tools[i].pattern) {
      // A wildcard opens only what the filter learns from answers.
      AddNameRule(tools[i].pattern->ToString(), {L4::kTcp}, first, last,
                  origin, &names);
      continue;
    }
    std::string where = absl::StrCat(label, ": ", ToolLabel(tool));
    absl::StatusOr<Reach> reach = ReachOf(ep.host, context, false);
    if (!reach.ok()) {
      // A name that does not exist can never be reached: an optional grant
      // is dropped. A transient failure is not a reason to drop: the
      // compiled policy would then depend on the DNS server's mood, so the
      // whole compile is refused as retryable.
      if (!tool.required() && RefusalOf(reach.status()) == Refusal::kRejected) {
        drop(absl::StrCat("cannot be reached: ", reach.status().message()));
        continue;
      }
      return within(reach.status(), where, "tool", tool.url());
    }
    if (reach->prefixes.empty()) {
      if (tool.required()) {
        const std::string reason = absl::StrCat(
            "is required, but it cannot be reached: ", reach->unreachable);
        return about(Rejected(absl::StrCat(where, " ", reason)), "tool",
                     tool.url(), reason);
      }
      drop(absl::StrCat("cannot be reached: ", reach->unreachable));
      continue;
    }
    AddRules(reach->prefixes, {L4::kTcp}, first, last, RuleSource::kTool,
             absl::StrCat(tool.name().empty() ? ep.host.ToString() : tool.name(),
                          wider),
             &rules);
    if (ep.host.is_name()) {
      AddNameRule(ep.host.name, {L4::kTcp}, first, last, origin, &names);
    }
  }

  // Explicit allow rules: asked for by name, so refused when unreachable.
  const bool own_loopback_by_rules =
      phase.loopback() == v1::LOOPBACK_RULES_ONLY;
  for (size_t i = 0; i < allow_hosts.size(); ++i) {
    const v1::AllowRule& rule = phase.allow(i);
    std::string where = absl::StrCat(label, ": allow ", Quote(rule.host()));
    uint16_t first = static_cast<uint16_t>(rule.port());
    uint16_t last = first;
    if (rule.has_port_range()) {
      first = static_cast<uint16_t>(rule.port_range().first());
      last = static_cast<uint16_t>(rule.port_range().last());
    }
    if (allow_patterns[i]) {
      // A wildcard opens only what the filter learns from answers.
      AddNameRule(allow_patterns[i]->ToString(), ProtocolsOf(rule.protocol()),
                  first, last, "allow", &names);
      continue;
    }
    absl::StatusOr<Reach> reach =
        ReachOf(allow_hosts[i], context, own_loopback_by_rules);
    if (!reach.ok()) return within(reach.status(), where, "allow", rule.host());
    if (reach->prefixes.empty()) {
      const std::string reason =
          absl::StrCat("cannot be reached: ", reach->unreachable);
      return about(Rejected(absl::StrCat(where, " ", reason)), "allow",
                   rule.host(), reason);
    }
    if (allow_hosts[i].is_name()) {
      AddNameRule(allow_hosts[i].name, ProtocolsOf(rule.protocol()), first,
                  last, "allow", &names);
    }
    AddRules(reach->prefixes, ProtocolsOf(rule.protocol()), first, last,
             RuleSource::kAllow,
             rule.name().empty() ? allow_hosts[i].ToString() : rule.name(),
             &rules);
  }

  // DNS: to the resolvers only, over UDP and TCP (large answers).
  const std::vector<L4> kDnsProtocols = {L4::kTcp, L4::kUdp};
  out.dns_mode = dns_mode;
  out.dns_mode_default = phase.dns().mode() == v1::Dns::MODE_UNSPECIFIED;
  switch (dns_mode) {
    case v1::Dns::NONE:
      break;
    case v1::Dns::FILTERED: {
      // A sandbox with its own network namespace is served there: the
      // lifecycle makes the filter's listeners in that namespace (and
      // refuses when it does not know which one it is).
      // The sandbox reaches no resolver: the kernel sends its queries to the
      // filter, and the filter (outside the sandbox) asks the upstreams.
      out.dns_filtered = true;
      out.name_rules = std::move(names);
      const v1::Dns& dns = phase.dns();
      if (dns.min_ttl_seconds()) out.dns_ttl.min_seconds = dns.min_ttl_seconds();
      if (dns.max_ttl_seconds()) out.dns_ttl.max_seconds = dns.max_ttl_seconds();
      if (dns.grace_seconds()) out.dns_ttl.grace_seconds = dns.grace_seconds();
      const v1::DnsBudget& budget = dns.budget();
      DnsBudget& b = out.dns_budget;
      if (budget.wildcard_names()) b.wildcard_names = budget.wildcard_names();
      if (budget.window_seconds()) b.window_seconds = budget.window_seconds();
      if (budget.max_wildcard_name_length()) {
        b.max_wildcard_name_length = budget.max_wildcard_name_length();
      }
      if (budget.wildcard_name_bytes()) {
        b.wildcard_name_bytes = budget.wildcard_name_bytes();
      }
      if (budget.queries_per_second()) {
        b.queries_per_second = budget.queries_per_second();
      }
      for (const std::string& text : dns.answers_may_point_at()) {
        absl::StatusOr<IpPrefix> p = IpPrefix::Parse(text);
        if (!p.ok()) return p.status();  // ValidatePolicySet checked it
        out.dns_answers_may_point_at.push_back(*p);
      }
      if (out.dns_ttl.min_seconds > out.dns_ttl.max_seconds) {
        const std::string reason =
            absl::StrCat("is above max_ttl_seconds ", out.dns_ttl.max_seconds,
                         " (a default; give both)");
        return about(Malformed(absl::StrCat(
                         label, ": dns TTL limits: min_ttl_seconds ",
                         out.dns_ttl.min_seconds, " ", reason)),
                     "dns.min_ttl_seconds",
                     absl::StrCat(out.dns_ttl.min_seconds), reason);
      }
      for (const std::string& text : dns.resolver()) {
        absl::StatusOr<HostPort> hp = HostPort::Parse(text, 53);
        if (!hp.ok()) return hp.status();  // ValidatePolicySet checked it
        out.dns_upstreams.push_back(*hp);
      }
      if (out.dns_upstreams.empty()) {
        if (!system_resolvers_.ok() && out.dns_mode_default) {
          // Not asked for by name: the phase is not refused for a host
          // that lists no nameserver. The filter blocks as ever, and
          // answers allowed names SERVFAIL (check and the record say so).
          break;
        }
        if (!system_resolvers_.ok()) {
          return within(
              system_resolvers_.status(),
              absl::StrCat(label,
                           ": dns FILTERED asks the host's nameservers, which "
                           "are not known (give --resolver, or list "
                           "upstreams with dns { mode: FILTERED resolver: "
                           "\"IP\" })"),
              "dns.mode", "FILTERED");
        }
        out.dns_upstreams = *system_resolvers_;
      }
      break;
    }
    case v1::Dns::LISTED:
      for (const std::string& text : phase.dns().resolver()) {
        absl::StatusOr<HostPort> hp = HostPort::Parse(text, 53);
        if (!hp.ok()) return hp.status();  // ValidatePolicySet checked it
        IpPrefix prefix = IpPrefix::Host(hp->addr.Unmapped());
        std::string why =
            UnreachableReason(prefix, context, own_loopback_by_rules);
        if (!why.empty()) {
          const std::string reason = absl::StrCat("cannot be reached: ", why);
          return about(Rejected(absl::StrCat(label, ": dns.resolver ",
                                             Quote(text), " ", reason)),
                       "dns.resolver", text, reason);
        }
        AddRules({prefix}, kDnsProtocols, hp->port, hp->port, RuleSource::kDns,
                 "dns", &rules);
      }
      break;
    default: {  // SYSTEM
      if (!system_resolvers_.ok()) {
        return within(
            system_resolvers_.status(),
            absl::StrCat(label,
                         ": dns SYSTEM allows the host's nameservers, which "
                         "are not known (give --resolver, or list resolvers "
                         "with dns { mode: LISTED resolver: \"IP\" })"),
            "dns.mode", "SYSTEM");
      }
      for (const HostPort& hp : *system_resolvers_) {
        IpPrefix prefix = IpPrefix::Host(hp.addr.Unmapped());
        HostPort shown{prefix.address(), hp.port};
        std::string why = UnreachableReason(prefix, context, false);
        if (!why.empty()) {
          out.dropped.push_back(DroppedGrant{
              shown.ToString(), "dns",
              absl::StrCat("the host's resolver cannot be reached: ", why),
              RuleSource::kDns});
          continue;
        }
        AddRules({prefix}, kDnsProtocols, hp.port, hp.port, RuleSource::kDns,
                 "dns", &rules);
      }
      break;
    }
  }

  SortAndMergeRules(&rules);
  out.rules = std::move(rules);
  return out;
}

absl::Status CheckAuditAllowed(const CompiledPolicy& policy, bool allowed,
                               absl::string_view how_to_allow) {
  if (allowed) return absl::OkStatus();
  std::vector<std::string> audited;
  for (const CompiledPhase& p : policy.phases) {
    if (p.audit_only) audited.push_back(Quote(p.name));
  }
  if (audited.empty()) return absl::OkStatus();
  std::string first;
  for (const CompiledPhase& p : policy.phases) {
    if (p.audit_only && first.empty()) first = p.name;
  }
  return WithSubject(Rejected(absl::StrCat(
      audited.size() == 1 ? "phase " : "phases ", absl::StrJoin(audited, ", "),
      " of policy ", Quote(policy.name), audited.size() == 1 ? " is" : " are",
      " audit only (enforce: AUDIT): nothing there would be denied; "
      "a policy alone cannot turn enforcement off, so set ",
      how_to_allow, " to run it audit only")),
      {first, "enforce", "AUDIT",
       absl::StrCat("audit only (enforce: AUDIT) needs ", how_to_allow)});
}

}  // namespace sandfence
