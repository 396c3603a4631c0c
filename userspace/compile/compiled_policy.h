// The compiler's output: the exact rules of each phase, or nothing.
// The egress controller turns these into kernel map entries; `check`
// prints them; records store them.
#ifndef SANDFENCE_COMPILE_COMPILED_POLICY_H_
#define SANDFENCE_COMPILE_COMPILED_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/ip.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

// IANA protocol numbers, as the kernel sees them.
enum class L4 : uint8_t { kTcp = 6, kUdp = 17 };

enum class RuleSource : uint8_t { kModel, kTool, kAllow, kDns };

struct Rule {
  L4 protocol = L4::kTcp;
  IpPrefix dest = IpPrefix::Host(IpAddress());  // IPv4 for mapped literals
  uint16_t port_first = 0;
  uint16_t port_last = 0;  // == port_first for a single port
  RuleSource source = RuleSource::kAllow;
  // What the rule was granted for: the host name of the URL or allow rule
  // ("model.internal"), a tool's name, or "dns".
  std::string origin;

  friend bool operator==(const Rule&, const Rule&) = default;
};

// An optional grant that could not be honoured and was left out.
struct DroppedGrant {
  std::string url;
  std::string name;
  std::string reason;  // e.g. "model_only drops optional tool grants"
  // kTool for a tool grant; kDns for a host resolver (dns SYSTEM) that the
  // sandbox cannot reach, with url "IP:PORT" and name "dns".
  RuleSource source = RuleSource::kTool;
};

// What the addresses learned for a name open (DNS FILTERED): a protocol
// and a port range.
struct NameGrant {
  L4 protocol = L4::kTcp;
  uint16_t port_first = 0;
  uint16_t port_last = 0;  // == port_first for one port

  friend bool operator==(const NameGrant&, const NameGrant&) = default;
  friend auto operator<=>(const NameGrant&, const NameGrant&) = default;
};

// A name a DNS-filtered phase may resolve: a host name or "*.suffix" (any
// name below the suffix, not the suffix itself), normalized.
struct NameRule {
  std::string pattern;
  std::vector<NameGrant> grants;
  // Where it came from, for records ("model", "tool:search", "allow").
  std::string origin;

  friend bool operator==(const NameRule&, const NameRule&) = default;
};

// How long learned addresses stay open, in seconds: the answer's TTL
// clamped to [min, max], plus grace.
struct DnsTtl {
  uint32_t min_seconds = 30;
  uint32_t max_seconds = 300;
  uint32_t grace_seconds = 60;

  friend bool operator==(const DnsTtl&, const DnsTtl&) = default;
};

// What names only a wildcard allows may carry out, per window (the policy's
// dns.budget, defaults filled in).
struct DnsBudget {
  uint32_t wildcard_names = 256;
  uint32_t window_seconds = 600;
  uint32_t max_wildcard_name_length = 128;
  uint32_t wildcard_name_bytes = 16384;
  // Of any name; 0 (tests only: the compiler fills the default): no limit
  // of the phase's own.
  uint32_t queries_per_second = 100;

  friend bool operator==(const DnsBudget&, const DnsBudget&) = default;
};

// What a rollout may send through what its phases allow (the policy set's
// egress_budget): per sandbox, across phases, counted in the kernel. 0: no
// limit.
struct EgressBudget {
  uint64_t connections = 0;
  uint64_t bytes = 0;
  uint64_t bytes_per_address = 0;

  bool any() const { return connections || bytes || bytes_per_address; }
  friend bool operator==(const EgressBudget&, const EgressBudget&) = default;
};

// A Unix socket name a phase lets its sandbox reach: a path ("/run/x.sock")
// or an abstract name (abstract; `name` without the leading NUL).
struct UnixName {
  std::string name;
  bool abstract = false;

  // "/run/x.sock" or "@name" (non-printable bytes as \xNN).
  std::string ToString() const;
  friend bool operator==(const UnixName& a, const UnixName& b) {
    return a.name == b.name && a.abstract == b.abstract;
  }
};

struct CompiledPhase {
  std::string name;
  v1::NetworkAccess access = v1::NETWORK_ACCESS_UNSPECIFIED;
  // Sorted (protocol, family, address, prefix length, port) and merged:
  // no rule is a duplicate of, or contained in, another.
  std::vector<Rule> rules;
  std::vector<DroppedGrant> dropped;
  v1::Loopback loopback = v1::LOOPBACK_DEFAULT;
  v1::Guard::Mode guard = v1::Guard::AUTO;
  bool guard_allow_io_uring = false;  // Guard.allow_io_uring
  bool guard_deny_ptrace = false;     // Guard.deny_ptrace
  v1::Audit::Allowed audit_allowed = v1::Audit::FIRST_PER_DESTINATION;
  // DNS mode FILTERED (issue 14): the kernel sends every query to port 53
  // (UDP or TCP, any address) to the sandbox's DNS filter instead, and
  // addresses the filter learns from allowed answers open the grants of
  // the names they answered. Restricted phases only.
  bool dns_filtered = false;
  // The DNS mode that applies (EffectiveDnsMode), and whether it is the
  // default (the phase sets none).
  v1::Dns::Mode dns_mode = v1::Dns::MODE_UNSPECIFIED;
  bool dns_mode_default = false;
  // With dns_filtered: the names the filter answers, the upstreams it asks
  // (empty: none is known -- a defaulted FILTERED on a host whose
  // nameservers are unknown -- and allowed names get SERVFAIL), and the
  // learned addresses' lifetime.
  std::vector<NameRule> name_rules;
  std::vector<HostPort> dns_upstreams;
  DnsTtl dns_ttl;
  DnsBudget dns_budget;
  // The protected ranges (dns/rebinding.h) a FILTERED answer may open.
  std::vector<IpPrefix> dns_answers_may_point_at;
  // AF_UNIX connect/sendmsg judged (issue 21): only the sandbox's own
  // sockets and unix_names are reachable. Restricted phases only; false
  // with unix { mode: UNCHECKED }, which unix_unchecked says.
  bool unix_checked = false;
  bool unix_unchecked = false;
  std::vector<UnixName> unix_names;
  // enforce: AUDIT (restricted phases only): everything is judged as usual
  // and nothing is denied; each would-deny is reported (SF_SB_AUDIT), and
  // the DNS filter answers the names it would block.
  bool audit_only = false;
  // The policy set's egress budget (the same in every phase): counted and
  // enforced where the phase is restricted and enforcing (budget_enforced).
  EgressBudget egress_budget;

  bool restricted() const { return access != v1::INHERIT; }
  bool budget_enforced() const {
    return restricted() && !audit_only && egress_budget.any();
  }
};

struct CompiledPolicy {
  std::string name;
  // sha256 hex of the deterministic serialization of the input PolicySet
  // (after CLI overlays), for records.
  std::string content_hash;
  std::vector<CompiledPhase> phases;
  // on_switch: CUT_REQUIRED (a host that cannot cut connections at a phase
  // switch refuses the policy).
  bool cut_required = false;
  EgressBudget egress_budget;

  // Whether any phase is audit only (enforce: AUDIT).
  bool HasAuditOnly() const {
    for (const auto& p : phases) {
      if (p.audit_only) return true;
    }
    return false;
  }

  // nullptr when absent.
  const CompiledPhase* FindPhase(absl::string_view phase_name) const {
    for (const auto& p : phases) {
      if (p.name == phase_name) return &p;
    }
    return nullptr;
  }
};

// What the compiler knows of the sandbox.
struct CompileContext {
  // The sandbox has its own network namespace: host loopback is unreachable.
  bool own_netns = false;
  // The sandbox belongs to another owner: only INHERIT may be applied.
  bool borrowed = false;
};

}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_COMPILED_POLICY_H_
