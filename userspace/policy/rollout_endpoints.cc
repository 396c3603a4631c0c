#include "policy/rollout_endpoints.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "policy/validate.h"

namespace sandfence {

v1::PolicySet ApplyRolloutEndpoints(v1::PolicySet policy,
                                    const RolloutEndpoints& endpoints) {
  policy.mutable_egress_budget()->MergeFrom(endpoints.egress_budget);
  if (policy.egress_budget().ByteSizeLong() == 0) policy.clear_egress_budget();
  for (v1::Phase& phase : *policy.mutable_phase()) {
    for (const std::string& url : endpoints.model) phase.add_model(url);
    for (const v1::ToolGrant& tool : endpoints.tools) {
      *phase.add_tool() = tool;
    }
    for (const v1::AllowRule& rule : endpoints.allow) {
      *phase.add_allow() = rule;
    }
    if (phase.network_access() == v1::INHERIT) continue;
    if (endpoints.unix_mode) phase.mutable_unix()->set_mode(*endpoints.unix_mode);
    for (const std::string& name : endpoints.unix_allow) {
      phase.mutable_unix()->add_allow(name);
    }
    if (EffectiveDnsMode(phase) == v1::Dns::FILTERED) {
      for (const std::string& prefix : endpoints.dns_answers_may_point_at) {
        phase.mutable_dns()->add_answers_may_point_at(prefix);
      }
    }
  }
  return policy;
}

v1::PolicySet InlinePolicySet(v1::NetworkAccess access) {
  v1::PolicySet policy;
  policy.set_name(std::string(kInlinePolicyName));
  v1::Phase* phase = policy.add_phase();
  phase->set_name(std::string(kInlinePhaseName));
  phase->set_network_access(access);
  return policy;
}

absl::string_view AccessName(v1::NetworkAccess access) {
  switch (access) {
    case v1::INHERIT:
      return "inherit";
    case v1::MODEL_ONLY:
      return "model_only";
    case v1::MODEL_AND_TOOLS:
      return "model_and_tools";
    default:
      return "unspecified";
  }
}

std::optional<v1::NetworkAccess> ParseAccessName(absl::string_view text) {
  std::string name =
      absl::AsciiStrToLower(absl::StrReplaceAll(text, {{"-", "_"}}));
  for (v1::NetworkAccess access :
       {v1::INHERIT, v1::MODEL_ONLY, v1::MODEL_AND_TOOLS}) {
    if (name == AccessName(access)) return access;
  }
  return std::nullopt;
}

}  // namespace sandfence
