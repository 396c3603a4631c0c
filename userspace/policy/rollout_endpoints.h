// Endpoints known only per rollout (the model server, tools, extra rules),
// supplied on the command line or, later, through the API, and laid over a
// policy file. The result is the effective policy: what is compiled, hashed
// and recorded.
#ifndef SANDFENCE_POLICY_ROLLOUT_ENDPOINTS_H_
#define SANDFENCE_POLICY_ROLLOUT_ENDPOINTS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

struct RolloutEndpoints {
  std::vector<std::string> model = {};    // endpoint URLs
  std::vector<v1::ToolGrant> tools = {};  // url, required, optional name
  std::vector<v1::AllowRule> allow = {};
  // Unix sockets (--unix, --unix-allow): for restricted phases only (an
  // inherit phase reaches every socket anyway).
  std::optional<v1::Unix::Mode> unix_mode = std::nullopt;
  std::vector<std::string> unix_allow = {};
  // --dns-answers-may-point-at: for restricted phases whose DNS is
  // FILTERED (the only ones an answer opens anything in).
  std::vector<std::string> dns_answers_may_point_at = {};
  // --egress-budget-*: each field set (nonzero) replaces the policy set's.
  v1::EgressBudget egress_budget = {};

  bool empty() const {
    return model.empty() && tools.empty() && allow.empty() && !unix_mode &&
           unix_allow.empty() && dns_answers_may_point_at.empty() &&
           egress_budget.ByteSizeLong() == 0;
  }
};

// `policy` with every endpoint appended to every phase, after the phase's
// own, and the budget's fields that are set laid over the policy set's. INHERIT phases get them too: they compile to no rules either way, and
// the effective policy (and its hash) then does not depend on the modes.
v1::PolicySet ApplyRolloutEndpoints(v1::PolicySet policy,
                                    const RolloutEndpoints& endpoints);

// A whole policy from the command line (`--network-access MODE`, no file):
// one phase named "default".
inline constexpr absl::string_view kInlinePolicyName = "inline";
inline constexpr absl::string_view kInlinePhaseName = "default";
v1::PolicySet InlinePolicySet(v1::NetworkAccess access);

// How modes are written in messages and on the command line: "inherit",
// "model_only", "model_and_tools".
absl::string_view AccessName(v1::NetworkAccess access);
// Accepts those names in any case, with '-' for '_' ("model-only").
std::optional<v1::NetworkAccess> ParseAccessName(absl::string_view text);

}  // namespace sandfence

#endif  // SANDFENCE_POLICY_ROLLOUT_ENDPOINTS_H_
