// Policy text -> PolicySet -> validation -> compile, as `sandfence check`
// and `sandfence run` do with a policy file. Names are answered by
// FuzzResolver (no network). Seeds: policies/*.textproto and the policy
// tests' snippets (fuzz/corpus/policy/).
#include <cstddef>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "common/status.h"
#include "fuzz_support.h"
#include "policy/policy_loader.h"
#include "policy/validate.h"

using sandfence::fuzz::Check;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sandfence::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sandfence::v1::PolicySet> policy =
      sandfence::ParsePolicySetText(text, "<fuzz>");
  if (!policy.ok()) {
    // policy_loader.h: Malformed, "SOURCE:LINE:COLUMN: ...".
    Check(
        sandfence::RefusalOf(policy.status()) == sandfence::Refusal::kMalformed,
        policy.status().ToString());
    Check(absl::StartsWith(policy.status().message(), "<fuzz>:"),
          policy.status().ToString());
    return 0;
  }
  absl::Status valid = sandfence::ValidatePolicySet(*policy);
  Check(valid.ok() ||
            sandfence::RefusalOf(valid) == sandfence::Refusal::kMalformed,
        valid.ToString());
  // The policy alone (a file with its own models), and with a rollout's
  // endpoints laid over it (a file whose model comes from --model).
  sandfence::fuzz::CompileAndCheck(*policy, {});
  sandfence::RolloutEndpoints endpoints;
  endpoints.model = {"http://model.internal:8000/v1"};
  sandfence::v1::ToolGrant tool;
  tool.set_url("https://search.internal/");
  tool.set_name("search");
  endpoints.tools = {tool};
  sandfence::fuzz::CompileAndCheck(*policy, endpoints);
  return 0;
}
