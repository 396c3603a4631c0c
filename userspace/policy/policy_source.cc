#include "policy/policy_source.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "policy/policy_loader.h"
#include "policy/rollout_endpoints.h"

namespace sandfence {

absl::StatusOr<v1::PolicySet> LoadPolicySource(const PolicySource& source,
                                               const std::string& policy_dir) {
  switch (source.kind) {
    case PolicySource::Kind::kSet:
      return source.set;
    case PolicySource::Kind::kText:
      return ParsePolicySetText(source.text, "<policy_text>");
    case PolicySource::Kind::kFile: {
      const std::string& name = source.file;
      if (policy_dir.empty()) {
        const std::string reason =
            "this daemon has no --policy-dir; send the policy inline";
        return WithSubject(Rejected(absl::StrCat("policy_file: ", reason)),
                           {"", "policy_file", name, reason});
      }
      if (name.empty() || name[0] == '.' || absl::StrContains(name, '/') ||
          name.size() > 255) {
        return WithSubject(
            Malformed(absl::StrCat("policy_file \"",
                                   absl::CHexEscape(name.substr(0, 64)),
                                   "\" must be a plain file name")),
            {"", "policy_file", name, "must be a plain file name"});
      }
      absl::StatusOr<v1::PolicySet> set =
          LoadPolicySetFile(absl::StrCat(policy_dir, "/", name));
      // A missing or unreadable file is the caller's mistake here, not
      // the host's: Malformed, with the reason.
      if (!set.ok() && RefusalOf(set.status()) != Refusal::kMalformed) {
        return WithSubject(Malformed(absl::StrCat("policy_file \"", name,
                                                  "\": ",
                                                  set.status().message())),
                           {"", "policy_file", name,
                            std::string(set.status().message())});
      }
      if (!set.ok()) {
        return WithSubject(set.status(),
                           {"", "policy_file", name,
                            std::string(set.status().message())});
      }
      return set;
    }
    case PolicySource::Kind::kNetworkAccess:
      if (!v1::NetworkAccess_IsValid(source.network_access) ||
          source.network_access == v1::NETWORK_ACCESS_UNSPECIFIED) {
        return WithSubject(Malformed("network_access is unset or unknown"),
                           {"", "network_access",
                            absl::StrCat(source.network_access),
                            "is unset or unknown"});
      }
      return InlinePolicySet(source.network_access);
    case PolicySource::Kind::kNone:
      break;
  }
  const std::string reason =
      "set policy_set, policy_text, policy_file or network_access";
  return WithSubject(Malformed(absl::StrCat("no policy: ", reason)),
                     {"", "policy", "", reason});
}

}  // namespace sandfence
