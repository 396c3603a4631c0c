// The daemon's StartRollout request, as far as it is checked without root
// or a kernel: the wire bytes parse into a StartRolloutRequest, the rollout
// id is validated (it names files and a cgroup), and the policy the request
// carries is parsed and compiled the way RolloutManager::StartLocked and
// CompileForRequest do. Those two are not callable on their own yet (the
// daemon is being restructured); when a request-validation function is,
// this file should call it instead of the steps below.
// Seeds: requests built by make_seeds.cc around policies/*.textproto.
#include <cstddef>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status.h"
#include "daemon/rollout_manager.h"
#include "fuzz_support.h"
#include "policy/policy_loader.h"
#include "policy/rollout_endpoints.h"
#include "sandfence/v1/daemon.pb.h"

namespace sandfence {
namespace {

using fuzz::Check;

// Ids become file names (state, journal, record) and a cgroup name: an id
// that passes must not be able to leave its directory.
void CheckId(const std::string& id) {
  absl::Status s = ValidateRolloutId(id);
  if (!s.ok()) {
    Check(RefusalOf(s) == Refusal::kMalformed, s.ToString());
    return;
  }
  Check(!id.empty() && id.size() <= 128 && id != "." && id != ".." &&
            id.find('/') == std::string::npos &&
            id.find('\0') == std::string::npos,
        absl::StrCat("rollout id \"", id, "\" passed validation"));
}

}  // namespace
}  // namespace sandfence

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sandfence::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandfence;
  v1::StartRolloutRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  CheckId(req.rollout_id());

  absl::StatusOr<v1::PolicySet> policy;
  switch (req.policy_case()) {
    case v1::StartRolloutRequest::kPolicySet:
      policy = req.policy_set();
      break;
    case v1::StartRolloutRequest::kPolicyText:
      policy = ParsePolicySetText(req.policy_text(), "<policy_text>");
      break;
    case v1::StartRolloutRequest::kNetworkAccess:
      if (!v1::NetworkAccess_IsValid(req.network_access()) ||
          req.network_access() == v1::NETWORK_ACCESS_UNSPECIFIED) {
        return 0;
      }
      policy = InlinePolicySet(req.network_access());
      break;
    default:  // policy_file reads the daemon's --policy-dir: not fuzzed
      return 0;
  }
  if (!policy.ok()) {
    Check(RefusalOf(policy.status()) == Refusal::kMalformed,
          policy.status().ToString());
    return 0;
  }
  RolloutEndpoints endpoints;
  for (const std::string& m : req.endpoints().model())
    endpoints.model.push_back(m);
  for (const v1::ToolGrant& t : req.endpoints().tool())
    endpoints.tools.push_back(t);
  for (const v1::AllowRule& a : req.endpoints().allow())
    endpoints.allow.push_back(a);
  fuzz::CompileAndCheck(*policy, endpoints);
  return 0;
}
