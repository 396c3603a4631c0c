#include "policy/validate.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/ip.h"
#include "common/status.h"

namespace sandfence {
namespace {

constexpr size_t kMaxPhaseName = 64;
constexpr size_t kMaxLabel = 128;

bool IsPhaseNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.';
}

// Tool and rule names are printed in one column of `check` output and in
// records: any text but control characters.
absl::Status CheckLabel(absl::string_view where, absl::string_view label) {
  if (label.size() > kMaxLabel) {
    return Malformed(absl::StrCat(where, ": name \"", label.substr(0, 32),
                                  "...\" is longer than ", kMaxLabel,
                                  " bytes"));
  }
  for (char c : label) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Malformed(
          absl::StrCat(where, ": name contains a control character"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPort(absl::string_view where, absl::string_view field,
                       uint32_t port) {
  if (port == 0 || port > 65535) {
    return Malformed(
        absl::StrCat(where, ": ", field, " ", port, " is not in 1..65535"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAllow(const std::string& phase_label, int index,
                           const v1::AllowRule& rule) {
  std::string where =
      rule.host().empty()
          ? absl::StrCat(phase_label, ": allow #", index + 1)
          : absl::StrCat(phase_label, ": allow \"", rule.host(), "\"");
  if (rule.host().empty()) {
    return Malformed(
        absl::StrCat(where, " has no host (a name, an IP address or a CIDR)"));
  }
  if (!v1::Protocol_IsValid(rule.protocol())) {
    return Malformed(absl::StrCat(where, ": protocol ", rule.protocol(),
                                  " is not TCP, UDP or ANY"));
  }
  if (absl::Status s = CheckLabel(where, rule.name()); !s.ok()) return s;
  if (rule.port() != 0 && rule.has_port_range()) {
    return Malformed(absl::StrCat(where, ": has both port ", rule.port(),
                                  " and port_range; give exactly one"));
  }
  if (rule.has_port_range()) {
    const v1::PortRange& r = rule.port_range();
    if (absl::Status s = CheckPort(where, "port_range.first", r.first());
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckPort(where, "port_range.last", r.last());
        !s.ok()) {
      return s;
    }
    if (r.first() > r.last()) {
      return Malformed(absl::StrCat(where, ": port_range ", r.first(), "-",
                                    r.last(), " is empty (first > last)"));
    }
    return absl::OkStatus();
  }
  if (rule.port() == 0) {
    return Malformed(
        absl::StrCat(where,
                     ": has no port; give port or port_range (sandfence allows "
                     "host + port + protocol, never a whole host)"));
  }
  return CheckPort(where, "port", rule.port());
}

}  // namespace

v1::Dns::Mode EffectiveDnsMode(const v1::Phase& phase) {
  if (phase.dns().mode() != v1::Dns::MODE_UNSPECIFIED) {
    return phase.dns().mode();
  }
  return phase.network_access() == v1::INHERIT ? v1::Dns::SYSTEM
                                               : v1::Dns::FILTERED;
}

namespace {

// Each limit has a ceiling that still bounds what a rollout carries out
// (and what the filter keeps per sandbox).
absl::Status ValidateDnsBudget(const std::string& phase_label,
                               const v1::DnsBudget& budget) {
  struct Limit {
    const char* field;
    uint32_t value;
    uint32_t ceiling;
    const char* unit;
  };
  for (const Limit& l :
       {Limit{"wildcard_names", budget.wildcard_names(), 100000, "names"},
        Limit{"window_seconds", budget.window_seconds(), 86400,
              "seconds (a day)"},
        Limit{"max_wildcard_name_length", budget.max_wildcard_name_length(),
              253, "characters (the longest DNS name)"},
        Limit{"wildcard_name_bytes", budget.wildcard_name_bytes(), 16 << 20,
              "bytes"},
        Limit{"queries_per_second", budget.queries_per_second(), 100000,
              "queries a second"}}) {
    if (l.value > l.ceiling) {
      return Malformed(absl::StrCat(phase_label, ": dns.budget.", l.field, " ",
                                    l.value, " is above ", l.ceiling, " ",
                                    l.unit));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDns(const std::string& phase_label,
                         const v1::Phase& phase) {
  const v1::Dns& dns = phase.dns();
  if (!v1::Dns::Mode_IsValid(dns.mode())) {
    return Malformed(absl::StrCat(phase_label, ": dns.mode ", dns.mode(),
                                  " is not SYSTEM, NONE, LISTED or FILTERED"));
  }
  const v1::Dns::Mode mode = EffectiveDnsMode(phase);
  const bool filtered = mode == v1::Dns::FILTERED;
  if (filtered && phase.network_access() == v1::INHERIT) {
    return Malformed(absl::StrCat(
        phase_label,
        ": dns.mode FILTERED on an inherit phase; inherit restricts nothing, "
        "so its DNS is the host's (filter a model_only or model_and_tools "
        "phase)"));
  }
  if (!filtered) {
    for (auto [field, value] :
         {std::pair{"min_ttl_seconds", dns.min_ttl_seconds()},
          {"max_ttl_seconds", dns.max_ttl_seconds()},
          {"grace_seconds", dns.grace_seconds()}}) {
      if (value != 0) {
        return Malformed(absl::StrCat(phase_label, ": dns.", field, " ", value,
                                      " is given, but it applies only with "
                                      "mode: FILTERED (mode is ",
                                      v1::Dns::Mode_Name(mode), ")"));
      }
    }
    if (dns.has_budget()) {
      return Malformed(absl::StrCat(
          phase_label,
          ": dns.budget is given, but it applies only with mode: FILTERED "
          "(mode is ",
          v1::Dns::Mode_Name(mode), ")"));
    }
    if (dns.answers_may_point_at_size() > 0) {
      return Malformed(absl::StrCat(
          phase_label, ": dns.answers_may_point_at \"",
          dns.answers_may_point_at(0),
          "\" is given, but it applies only with mode: FILTERED (mode is ",
          v1::Dns::Mode_Name(mode), ")"));
    }
  } else {
    if (absl::Status s = ValidateDnsBudget(phase_label, dns.budget());
        !s.ok()) {
      return s;
    }
    constexpr int kMaxPointAt = 64;
    if (dns.answers_may_point_at_size() > kMaxPointAt) {
      return Malformed(absl::StrCat(
          phase_label, ": dns.answers_may_point_at has ",
          dns.answers_may_point_at_size(), " prefixes; at most ", kMaxPointAt));
    }
    for (const std::string& text : dns.answers_may_point_at()) {
      if (absl::StatusOr<IpPrefix> p = IpPrefix::Parse(text); !p.ok()) {
        return Malformed(absl::StrCat(phase_label,
                                      ": dns.answers_may_point_at \"", text,
                                      "\": ", p.status().message()));
      }
    }
    constexpr uint32_t kDay = 86400;
    if (dns.max_ttl_seconds() > kDay || dns.grace_seconds() > kDay ||
        dns.min_ttl_seconds() > kDay) {
      return Malformed(absl::StrCat(
          phase_label, ": dns TTL limits (min_ttl_seconds ",
          dns.min_ttl_seconds(), ", max_ttl_seconds ", dns.max_ttl_seconds(),
          ", grace_seconds ", dns.grace_seconds(),
          ") must each be at most 86400 (a day)"));
    }
    if (dns.min_ttl_seconds() != 0 && dns.max_ttl_seconds() != 0 &&
        dns.min_ttl_seconds() > dns.max_ttl_seconds()) {
      return Malformed(absl::StrCat(
          phase_label, ": dns.min_ttl_seconds ", dns.min_ttl_seconds(),
          " is above dns.max_ttl_seconds ", dns.max_ttl_seconds()));
    }
  }
  if (mode != v1::Dns::LISTED && !filtered) {
    if (dns.resolver_size() > 0) {
      return Malformed(absl::StrCat(
          phase_label, ": dns.resolver \"", dns.resolver(0),
          "\" is given, but resolvers are listed only with mode: LISTED or "
          "FILTERED (mode is ",
          v1::Dns::Mode_Name(mode), ")"));
    }
    return absl::OkStatus();
  }
  if (mode == v1::Dns::LISTED && dns.resolver_size() == 0) {
    return Malformed(absl::StrCat(
        phase_label,
        ": dns.mode LISTED lists no resolver; add resolver: \"IP[:PORT]\" or "
        "use mode: NONE"));
  }
  for (const std::string& resolver : dns.resolver()) {
    absl::StatusOr<HostPort> hp = HostPort::Parse(resolver, 53);
    if (!hp.ok()) {
      return Malformed(
          absl::StrCat(phase_label, ": dns.resolver \"", resolver,
                       "\" is not \"IP\", \"IP:PORT\" or \"[IPv6]:PORT\": ",
                       hp.status().message()));
    }
  }
  return absl::OkStatus();
}

// enforce on a phase against the policy set's (which, when set, applies
// to every phase: a reader of the file's top line must be able to trust it).
absl::Status ValidateEnforce(const v1::PolicySet& policy,
                             const v1::Phase& phase) {
  const std::string label = PhaseLabel(phase.name());
  if (!v1::Enforce_IsValid(phase.enforce())) {
    return Malformed(absl::StrCat(label, ": enforce ", phase.enforce(),
                                  " is not ENFORCE or AUDIT"));
  }
  if (policy.enforce() != v1::ENFORCE_UNSPECIFIED &&
      phase.enforce() != v1::ENFORCE_UNSPECIFIED &&
      phase.enforce() != policy.enforce()) {
    return Malformed(absl::StrCat(
        label, ": enforce: ", v1::Enforce_Name(phase.enforce()),
        " contradicts the policy's enforce: ",
        v1::Enforce_Name(policy.enforce()),
        " (a policy-level enforce applies to every phase; set enforce per "
        "phase instead)"));
  }
  if (phase.enforce() == v1::AUDIT && phase.network_access() == v1::INHERIT) {
    return Malformed(absl::StrCat(
        label,
        ": enforce: AUDIT on an inherit phase; inherit denies nothing, so "
        "there is nothing to audit (audit a model_only or model_and_tools "
        "phase)"));
  }
  return absl::OkStatus();
}

// A refusal of something in phase `name` says so to programs too; its
// reason is the message after the phase's label.
absl::Status InPhase(absl::Status s, absl::string_view name) {
  const std::string prefix = absl::StrCat(PhaseLabel(name), ": ");
  absl::string_view reason = s.message();
  if (absl::StartsWith(reason, prefix)) reason.remove_prefix(prefix.size());
  const std::string why(reason);
  return WithSubject(std::move(s), {std::string(name), "", "", why});
}

absl::Status ValidatePhase(const v1::Phase& phase) {
  std::string label = PhaseLabel(phase.name());
  if (phase.network_access() == v1::NETWORK_ACCESS_UNSPECIFIED) {
    const std::string reason =
        "is not set; choose INHERIT, MODEL_ONLY or MODEL_AND_TOOLS (an unset "
        "mode is never taken as INHERIT)";
    return WithSubject(
        Malformed(absl::StrCat(label, ": network_access ", reason)),
        {phase.name(), "network_access", "", reason});
  }
  if (!v1::NetworkAccess_IsValid(phase.network_access())) {
    const std::string reason = "is not INHERIT, MODEL_ONLY or MODEL_AND_TOOLS";
    return WithSubject(
        Malformed(absl::StrCat(label, ": network_access ",
                               phase.network_access(), " ", reason)),
        {phase.name(), "network_access", absl::StrCat(phase.network_access()),
         reason});
  }
  for (int i = 0; i < phase.model_size(); ++i) {
    if (phase.model(i).empty()) {
      return Malformed(absl::StrCat(label, ": model #", i + 1,
                                    " is empty; give a URL such as "
                                    "\"http://model.internal:8000/v1\""));
    }
  }
  for (int i = 0; i < phase.tool_size(); ++i) {
    const v1::ToolGrant& tool = phase.tool(i);
    std::string where =
        tool.name().empty()
            ? absl::StrCat(label, ": tool #", i + 1)
            : absl::StrCat(label, ": tool \"", tool.name(), "\"");
    if (tool.url().empty()) {
      return Malformed(absl::StrCat(where, " has no url"));
    }
    if (absl::Status s = CheckLabel(where, tool.name()); !s.ok()) return s;
  }
  for (int i = 0; i < phase.allow_size(); ++i) {
    if (absl::Status s = ValidateAllow(label, i, phase.allow(i)); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateDns(label, phase); !s.ok()) return s;
  if (!v1::Loopback_IsValid(phase.loopback())) {
    return Malformed(absl::StrCat(label, ": loopback ", phase.loopback(),
                                  " is not a known value"));
  }
  if (!v1::Guard::Mode_IsValid(phase.guard().mode())) {
    return Malformed(absl::StrCat(label, ": guard.mode ", phase.guard().mode(),
                                  " is not a known value"));
  }
  if (!v1::Unix::Mode_IsValid(phase.unix().mode())) {
    return Malformed(absl::StrCat(label, ": unix.mode ", phase.unix().mode(),
                                  " is not CHECKED or UNCHECKED"));
  }
  if (!v1::Audit::Allowed_IsValid(phase.audit().allowed())) {
    return Malformed(absl::StrCat(label, ": audit.allowed ",
                                  phase.audit().allowed(),
                                  " is not a known value"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string PhaseLabel(absl::string_view phase_name) {
  return absl::StrCat("phase \"", phase_name, "\"");
}

bool AuditOnly(const v1::PolicySet& policy, const v1::Phase& phase) {
  const v1::Enforce enforce = phase.enforce() != v1::ENFORCE_UNSPECIFIED
                                  ? phase.enforce()
                                  : policy.enforce();
  return enforce == v1::AUDIT && phase.network_access() != v1::INHERIT;
}

absl::Status ValidatePolicySet(const v1::PolicySet& policy) {
  if (!v1::Enforce_IsValid(policy.enforce())) {
    return Malformed(absl::StrCat("policy \"", policy.name(), "\": enforce ",
                                  policy.enforce(),
                                  " is not ENFORCE or AUDIT"));
  }
  if (policy.phase_size() == 0) {
    return Malformed(absl::StrCat(
        "policy \"", policy.name(),
        "\" has no phase; add phase { name: \"agent\" network_access: "
        "MODEL_ONLY }"));
  }
  std::map<std::string, int> seen;  // name -> 1-based position
  for (int i = 0; i < policy.phase_size(); ++i) {
    const std::string& name = policy.phase(i).name();
    if (name.empty()) {
      return Malformed(
          absl::StrCat("phase #", i + 1, " has no name; add name: \"...\""));
    }
    bool good = name.size() <= kMaxPhaseName;
    for (char c : name) good = good && IsPhaseNameChar(c);
    if (!good) {
      return Malformed(absl::StrCat(
          PhaseLabel(name),
          ": a phase name uses only letters, digits, '_', '-' and '.', at "
          "most ",
          kMaxPhaseName, " of them"));
    }
    auto [it, inserted] = seen.emplace(name, i + 1);
    if (!inserted) {
      return Malformed(absl::StrCat(PhaseLabel(name),
                                    " is defined twice (phases #", it->second,
                                    " and #", i + 1, ")"));
    }
    if (absl::Status s = ValidatePhase(policy.phase(i)); !s.ok()) {
      return InPhase(std::move(s), name);
    }
    if (absl::Status s = ValidateEnforce(policy, policy.phase(i)); !s.ok()) {
      return InPhase(std::move(s), name);
    }
  }
  return absl::OkStatus();
}

}  // namespace sandfence
