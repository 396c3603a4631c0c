// The policy compiler: an effective policy (a PolicySet with the rollout's
// endpoints laid over it), the sandbox's context and a resolver become the
// exact rules of each phase -- or a refusal, before anything is attached.
//
// The network modes follow design.md to the letter:
//   inherit          no rules; nothing is resolved (URLs and hosts are
//                    still checked: a typo is reported in every mode).
//   model_only       the model endpoints, allow rules and DNS. Optional tool
//                    grants are dropped (and listed); a required one is
//                    refused.
//   model_and_tools  also every tool grant; an optional grant the sandbox
//                    cannot reach (or whose name does not exist) is dropped
//                    with the reason; a required one is refused.
// A model endpoint is always required, and a restricted phase needs one. A
// borrowed sandbox accepts only inherit. Allow rules and listed DNS
// resolvers are explicit, so an unreachable one is refused like a required
// grant. The host's own resolvers (dns SYSTEM) are implicit: one the
// sandbox cannot reach (127.0.0.53 from a private network namespace) is
// dropped with the reason instead, so that the default does not refuse
// every policy on hosts that run a local caching resolver.
//
// A name's addresses that the sandbox cannot reach are left out; the name
// is unreachable only when none is left. A DNS timeout is never a reason to
// drop even an optional grant: the compiled policy would then depend on
// the DNS server's mood, so the compile is refused as retryable instead.
//
// Refusal classes (common/status.h): Malformed for input that does not
// parse (a bad URL), Rejected for a policy that can never be enforced,
// Unavailable for a transient fault (a DNS timeout) -- passed through from
// the resolver with the phase, field and value added.
#ifndef SANDFENCE_COMPILE_COMPILER_H_
#define SANDFENCE_COMPILE_COMPILER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "compile/endpoint.h"
#include "policy/rollout_endpoints.h"
#include "resolve/resolver.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

class PolicyCompiler {
 public:
  // `resolver` (not owned) turns names into addresses. `system_resolvers`
  // are the host's nameservers for dns SYSTEM; an error reading them
  // matters only to a phase that needs them, and is reported by it.
  PolicyCompiler(Resolver* resolver,
                 absl::StatusOr<std::vector<HostPort>> system_resolvers);

  // Applies `endpoints` to every phase, validates the result
  // (ValidatePolicySet), hashes it, and compiles every phase -- or only the
  // phase named `only_phase` when it is not empty. The first refusal, in
  // phase order, is returned.
  absl::StatusOr<CompiledPolicy> Compile(const v1::PolicySet& policy,
                                         const RolloutEndpoints& endpoints,
                                         const CompileContext& context,
                                         absl::string_view only_phase = "");

  // One validated phase.
  absl::StatusOr<CompiledPhase> CompilePhase(const v1::Phase& phase,
                                             const CompileContext& context);

 private:
  // Where a host can be reached from the sandbox: host prefixes of its
  // reachable addresses (resolved and unmapped for names), and why the
  // others cannot be reached. Errors come from the resolver, unchanged.
  struct Reach {
    std::vector<IpPrefix> prefixes;
    std::string unreachable;  // why, when prefixes is empty
  };
  absl::StatusOr<Reach> ReachOf(const Host& host, const CompileContext& context,
                                bool own_loopback_by_rules);
  absl::StatusOr<std::vector<IpAddress>> Addresses(const std::string& name);

  Resolver* resolver_;
  absl::StatusOr<std::vector<HostPort>> system_resolvers_;
  // One answer per name for a whole compile, so that every phase sees the
  // same addresses for it.
  std::map<std::string, absl::StatusOr<std::vector<IpAddress>>> cache_;
};

// Audit-only phases (enforce: AUDIT) turn enforcement off for what they
// would deny: a policy file alone must not do that on a host. OK when the
// policy has none or `allowed`; else Rejected, naming the phases and
// `how_to_allow` (the flag or field that allows them).
absl::Status CheckAuditAllowed(const CompiledPolicy& policy, bool allowed,
                               absl::string_view how_to_allow);

}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_COMPILER_H_
