// Where a rollout's policy set comes from: an inline set, its text, a file
// by name in a policy directory, or a bare network mode. One place for the
// choice and its errors, whatever asks (the daemon's StartRollout, the OCI
// hook).
#ifndef SANDFENCE_POLICY_POLICY_SOURCE_H_
#define SANDFENCE_POLICY_POLICY_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

struct PolicySource {
  enum class Kind { kNone, kSet, kText, kFile, kNetworkAccess };
  Kind kind = Kind::kNone;
  v1::PolicySet set;                // kSet
  std::string text;                 // kText: a PolicySet in text format
  std::string file;                 // kFile: a plain name in policy_dir
  v1::NetworkAccess network_access = v1::NETWORK_ACCESS_UNSPECIFIED;
};

// The policy set, or: Malformed (no source, a file name with '/' or a
// leading '.', an unknown mode, text that does not parse, a file that does
// not parse or cannot be read), Rejected (a file name without a policy
// directory to look in).
absl::StatusOr<v1::PolicySet> LoadPolicySource(const PolicySource& source,
                                               const std::string& policy_dir);

}  // namespace sandfence

#endif  // SANDFENCE_POLICY_POLICY_SOURCE_H_
