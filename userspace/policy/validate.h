// Structural checks of a PolicySet, before anything is resolved or compiled:
// what a policy must say to mean anything at all. Everything that needs
// addresses, names or the sandbox's context is the compiler's job.
#ifndef SANDFENCE_POLICY_VALIDATE_H_
#define SANDFENCE_POLICY_VALIDATE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

// OK, or Malformed naming the phase, the field and the value:
// - at least one phase; every phase has a unique, non-empty name made of
//   letters, digits, '_', '-', '.';
// - network_access is set (unset is an error, never a silent INHERIT), and
//   every enum holds a known value;
// - model URLs and tool URLs are non-empty (their syntax is checked by the
//   compiler, which normalizes hosts in one place);
// - an allow rule has a host and exactly one of port (1..65535) and
//   port_range (1 <= first <= last <= 65535);
// - dns resolvers are listed only with mode LISTED, LISTED lists at least
//   one, and each is "IP", "IP:PORT" or "[IPv6]:PORT";
// - enforce: a phase may repeat the policy set's enforce but not say the
//   other value, and only a restricted phase may say AUDIT itself.
absl::Status ValidatePolicySet(const v1::PolicySet& policy);

// `phase "agent"`, the prefix of every message about a phase.
std::string PhaseLabel(absl::string_view phase_name);

// The DNS mode that applies to a phase: its own, or when it sets none,
// FILTERED for a restricted phase (issue 14: names the phase does not
// grant never leave the host) and SYSTEM for an inherit phase.
v1::Dns::Mode EffectiveDnsMode(const v1::Phase& phase);

// Whether a phase of `policy` is audit only: AUDIT by its own enforce or,
// when it sets none, by the policy set's; inherit phases never are (they
// deny nothing to audit).
bool AuditOnly(const v1::PolicySet& policy, const v1::Phase& phase);

}  // namespace sandfence

#endif  // SANDFENCE_POLICY_VALIDATE_H_
