#include "compile/format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "compile/rules.h"
#include "policy/rollout_endpoints.h"

namespace sandfence {
namespace {

std::string Pad(absl::string_view s, size_t width) {
  std::string out(s);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

std::string GrantText(const NameGrant& g) {
  if (g.port_first == g.port_last) {
    return absl::StrCat(L4Name(g.protocol), ":", g.port_first);
  }
  return absl::StrCat(L4Name(g.protocol), ":", g.port_first, "-", g.port_last);
}

std::string GrantsText(const NameRule& rule) {
  std::vector<std::string> parts;
  for (const NameGrant& g : rule.grants) parts.push_back(GrantText(g));
  return absl::StrJoin(parts, ",");
}

std::string UpstreamsText(const CompiledPhase& phase) {
  std::vector<std::string> parts;
  for (const HostPort& hp : phase.dns_upstreams) parts.push_back(hp.ToString());
  return parts.empty()
             ? "none known (the host's nameservers are not known and no "
               "--resolver is given): allowed names get SERVFAIL"
             : absl::StrJoin(parts, ", ");
}

// " (the default)" when the phase sets no dns mode.
std::string DefaultText(const CompiledPhase& phase) {
  return phase.dns_mode_default ? " (the default)" : "";
}

std::string DroppedWhat(const DroppedGrant& d) {
  if (d.source == RuleSource::kDns) return absl::StrCat("dns ", d.url);
  if (d.name.empty()) return absl::StrCat("tool ", d.url);
  return absl::StrCat("tool \"", d.name, "\" (", d.url, ")");
}

// "egress, the rollout's across phases: at most 100 connections, 1048576
// bytes, 65536 bytes per address" (and why this phase does not count).
std::string EgressBudgetText(const CompiledPhase& phase) {
  const EgressBudget& b = phase.egress_budget;
  std::vector<std::string> parts;
  if (b.connections) parts.push_back(absl::StrCat(b.connections, " connections"));
  if (b.bytes) parts.push_back(absl::StrCat(b.bytes, " bytes"));
  if (b.bytes_per_address) {
    parts.push_back(absl::StrCat(b.bytes_per_address, " bytes per address"));
  }
  return absl::StrCat(
      "egress, the rollout's across phases: at most ",
      absl::StrJoin(parts, ", "),
      phase.budget_enforced()
          ? "; past it EPERM, and packets past a byte budget are dropped"
          : phase.restricted()
                ? "; not counted or enforced in this phase (audit only)"
                : "; not counted or enforced in this phase (inherit)");
}

}  // namespace

std::string FormatDestination(const Rule& rule) {
  std::string addr = rule.dest.ToString();
  if (!rule.dest.address().is_v4()) addr = absl::StrCat("[", addr, "]");
  if (rule.port_first == rule.port_last) {
    return absl::StrCat(addr, ":", rule.port_first);
  }
  return absl::StrCat(addr, ":", rule.port_first, "-", rule.port_last);
}

std::string FormatCompiledPolicyText(const CompiledPolicy& policy) {
  size_t phase_width = 0;
  size_t dest_width = 0;
  for (const CompiledPhase& phase : policy.phases) {
    phase_width = std::max(phase_width, phase.name.size());
    for (const Rule& rule : phase.rules) {
      dest_width = std::max(dest_width, FormatDestination(rule).size());
    }
  }

  std::string out = absl::StrCat("policy \"", policy.name,
                                 "\"  sha256:", policy.content_hash, "\n");
  // Loud, and before any rule: an audit phase must never be read as an
  // enforced one.
  std::vector<std::string> audited;
  for (const CompiledPhase& phase : policy.phases) {
    if (phase.audit_only)
      audited.push_back(absl::StrCat("\"", phase.name, "\""));
  }
  if (!audited.empty()) {
    absl::StrAppend(
        &out, "AUDIT ONLY: ", audited.size() == 1 ? "phase " : "phases ",
        absl::StrJoin(audited, ", "), audited.size() == 1 ? " denies" : " deny",
        " nothing (enforce: AUDIT); what the rules below "
        "would deny is allowed and recorded as \"would deny\"\n");
  }
  for (const CompiledPhase& phase : policy.phases) {
    std::string name = Pad(phase.name, phase_width);
    if (!phase.restricted()) {
      absl::StrAppend(&out, name, "  mode ", AccessName(phase.access),
                      " (no restrictions)\n");
      continue;
    }
    absl::StrAppend(&out, name, "  mode ", AccessName(phase.access),
                    phase.audit_only ? "  AUDIT ONLY: nothing is denied" : "",
                    "\n");
    for (const Rule& rule : phase.rules) {
      absl::StrAppend(&out, name, "  allow ", L4Name(rule.protocol), " ",
                      Pad(FormatDestination(rule), dest_width), "  ",
                      rule.origin, "\n");
    }
    for (const DroppedGrant& d : phase.dropped) {
      absl::StrAppend(&out, name, "  drop  ", DroppedWhat(d), ": ", d.reason,
                      "\n");
    }
    if (!phase.dns_filtered) {
      // The rules above show what SYSTEM and LISTED open.
      absl::StrAppend(&out, name, "  dns   ",
                      absl::AsciiStrToLower(v1::Dns::Mode_Name(phase.dns_mode)),
                      DefaultText(phase),
                      phase.dns_mode == v1::Dns::NONE
                          ? ": no resolver is reachable"
                          : ": the resolvers allowed above",
                      "\n");
    }
    if (phase.dns_filtered) {
      absl::StrAppend(&out, name, "  dns   filtered", DefaultText(phase),
                      ": upstream ", UpstreamsText(phase),
                      "; learned addresses live the TTL "
                      "clamped to ",
                      phase.dns_ttl.min_seconds, "-", phase.dns_ttl.max_seconds,
                      " s, + ", phase.dns_ttl.grace_seconds, " s\n");
      const DnsBudget& b = phase.dns_budget;
      absl::StrAppend(&out, name,
                      "  dns   budget: names only a wildcard "
                      "allows: at most ",
                      b.wildcard_names, " distinct, ", b.wildcard_name_bytes,
                      " characters in all, per ", b.window_seconds,
                      " s; each at most ", b.max_wildcard_name_length,
                      " characters\n");
      absl::StrAppend(&out, name, "  dns   rate: at most ",
                      b.queries_per_second,
                      " queries a second (bursts of twice that)\n");
      absl::StrAppend(
          &out, name, "  dns   answers may point at: ",
          phase.dns_answers_may_point_at.empty()
              ? std::string("none of the protected ranges (loopback, "
                            "link-local, multicast, the host's own "
                            "addresses; private ones too for a name only a "
                            "wildcard allows)")
              : absl::StrJoin(phase.dns_answers_may_point_at, ", ",
                              [](std::string* o, const IpPrefix& p) {
                                o->append(p.ToString());
                              }),
          "\n");
      size_t width = 0;
      for (const NameRule& r : phase.name_rules) {
        width = std::max(width, r.pattern.size());
      }
      for (const NameRule& r : phase.name_rules) {
        absl::StrAppend(&out, name, "  name  ", Pad(r.pattern, width), "  ",
                        GrantsText(r), "  ", r.origin, "\n");
      }
      absl::StrAppend(&out, name,
                      phase.audit_only
                          ? "  name  every other name: answered, recorded as "
                            "would_block (audit only)\n"
                          : "  name  every other name: NXDOMAIN (blocked)\n");
    }
    if (phase.unix_checked) {
      absl::StrAppend(&out, name,
                      "  unix  the sandbox's own sockets (names it bound)\n");
      for (const UnixName& n : phase.unix_names) {
        absl::StrAppend(&out, name, "  unix  ", n.ToString(), "\n");
      }
    } else if (phase.unix_unchecked) {
      absl::StrAppend(&out, name,
                      "  unix  UNCHECKED: every Unix socket is reachable\n");
    }
    if (phase.egress_budget.any()) {
      absl::StrAppend(&out, name, "  budget ", EgressBudgetText(phase), "\n");
    }
    // Default-deny is stated, never implied; so is its absence.
    absl::StrAppend(&out, name,
                    phase.audit_only
                        ? "  audit all other traffic: allowed, recorded as "
                          "would deny (enforce: AUDIT)\n"
                        : "  deny  all other traffic\n");
  }
  return out;
}

std::string FormatCompiledPolicyJson(const CompiledPolicy& policy) {
  // Only when set, so that other policies' output is as it was.
  std::string budget;
  if (policy.egress_budget.any()) {
    const EgressBudget& b = policy.egress_budget;
    budget = absl::StrCat(",\n  \"egress_budget\": {\"connections\": ",
                          b.connections, ", \"bytes\": ", b.bytes,
                          ", \"bytes_per_address\": ", b.bytes_per_address,
                          "}");
  }
  std::vector<std::string> phases;
  for (const CompiledPhase& phase : policy.phases) {
    std::vector<std::string> rules;
    for (const Rule& rule : phase.rules) {
      rules.push_back(absl::StrCat(
          "        {\"protocol\": ", JsonQuote(L4Name(rule.protocol)),
          ", \"dest\": ", JsonQuote(rule.dest.ToString()), ", \"port_first\": ",
          rule.port_first, ", \"port_last\": ", rule.port_last,
          ", \"source\": ", JsonQuote(RuleSourceName(rule.source)),
          ", \"origin\": ", JsonQuote(rule.origin), "}"));
    }
    std::vector<std::string> dropped;
    for (const DroppedGrant& d : phase.dropped) {
      dropped.push_back(absl::StrCat(
          "        {\"source\": ", JsonQuote(RuleSourceName(d.source)),
          ", \"name\": ", JsonQuote(d.name), ", \"url\": ", JsonQuote(d.url),
          ", \"reason\": ", JsonQuote(d.reason), "}"));
    }
    auto list = [](const std::vector<std::string>& items) {
      if (items.empty()) return std::string("[]");
      return absl::StrCat("[\n", absl::StrJoin(items, ",\n"), "\n      ]");
    };
    // Only for filtered phases, so that other policies' output is as it was.
    std::string dns;
    if (phase.dns_filtered) {
      std::vector<std::string> names, upstreams;
      for (const NameRule& r : phase.name_rules) {
        std::vector<std::string> grants;
        for (const NameGrant& g : r.grants) {
          grants.push_back(
              absl::StrCat("{\"protocol\": ", JsonQuote(L4Name(g.protocol)),
                           ", \"port_first\": ", g.port_first,
                           ", \"port_last\": ", g.port_last, "}"));
        }
        names.push_back(
            absl::StrCat("          {\"pattern\": ", JsonQuote(r.pattern),
                         ", \"origin\": ", JsonQuote(r.origin),
                         ", \"grants\": [", absl::StrJoin(grants, ", "), "]}"));
      }
      for (const HostPort& hp : phase.dns_upstreams) {
        upstreams.push_back(JsonQuote(hp.ToString()));
      }
      dns = absl::StrCat(
          "      \"dns_filter\": {\n        \"mode_default\": ",
          phase.dns_mode_default ? "true" : "false",
          ",\n        \"upstreams\": [", absl::StrJoin(upstreams, ", "),
          "],\n        \"min_ttl_seconds\": ", phase.dns_ttl.min_seconds,
          ",\n        \"max_ttl_seconds\": ", phase.dns_ttl.max_seconds,
          ",\n        \"grace_seconds\": ", phase.dns_ttl.grace_seconds,
          ",\n        \"budget\": {\"wildcard_names\": ",
          phase.dns_budget.wildcard_names,
          ", \"window_seconds\": ", phase.dns_budget.window_seconds,
          ", \"max_wildcard_name_length\": ",
          phase.dns_budget.max_wildcard_name_length,
          ", \"wildcard_name_bytes\": ", phase.dns_budget.wildcard_name_bytes,
          ", \"queries_per_second\": ", phase.dns_budget.queries_per_second,
          "}", ",\n        \"answers_may_point_at\": [",
          absl::StrJoin(phase.dns_answers_may_point_at, ", ",
                        [](std::string* o, const IpPrefix& p) {
                          absl::StrAppend(o, "\"", p.ToString(), "\"");
                        }),
          "]", ",\n        \"names\": ",
          names.empty()
              ? std::string("[]")
              : absl::StrCat("[\n", absl::StrJoin(names, ",\n"), "\n        ]"),
          "\n      },\n");
    }
    std::string unix_sockets;
    if (phase.restricted() && (phase.unix_checked || phase.unix_unchecked)) {
      std::vector<std::string> names;
      for (const UnixName& n : phase.unix_names) {
        names.push_back(JsonQuote(n.ToString()));
      }
      unix_sockets =
          absl::StrCat("      \"unix\": {\"checked\": ",
                       phase.unix_checked ? "true" : "false", ", \"allow\": [",
                       absl::StrJoin(names, ", "), "]},\n");
    }
    phases.push_back(absl::StrCat(
        "    {\n"
        "      \"name\": ",
        JsonQuote(phase.name), ",\n", "      \"network_access\": ",
        JsonQuote(v1::NetworkAccess_Name(phase.access)), ",\n",
        "      \"restricted\": ", phase.restricted() ? "true" : "false", ",\n",
        "      \"enforce\": ",
        JsonQuote(phase.audit_only ? "AUDIT" : "ENFORCE"), ",\n",
        "      \"rules\": ", list(rules), ",\n",
        "      \"dropped\": ", list(dropped), ",\n", dns, unix_sockets,
        "      \"loopback\": ", JsonQuote(v1::Loopback_Name(phase.loopback)),
        ",\n",
        "      \"guard\": ", JsonQuote(v1::Guard::Mode_Name(phase.guard)),
        ",\n", "      \"audit_allowed\": ",
        JsonQuote(v1::Audit::Allowed_Name(phase.audit_allowed)), "\n",
        "    }"));
  }
  return absl::StrCat("{\n  \"policy\": ", JsonQuote(policy.name),
                      ",\n  \"content_hash\": ", JsonQuote(policy.content_hash),
                      budget, ",\n  \"phases\": [\n", absl::StrJoin(phases, ",\n"),
                      "\n  ]\n}\n");
}

}  // namespace sandfence
