// Reading policy files: protobuf text format into a PolicySet.
//
// Parsing is strict: unknown fields, unknown enum names and a singular field
// given twice are errors that name the source, line, column, field and
// value. Structure (names, modes, ports) is checked separately by
// ValidatePolicySet(), after any per-rollout overlay has been applied.
#ifndef SANDFENCE_POLICY_POLICY_LOADER_H_
#define SANDFENCE_POLICY_POLICY_LOADER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

// Parses `text`; `source_name` (a file name, or "<inline>") prefixes every
// error message. Errors: Malformed (InvalidArgument), message
// "SOURCE:LINE:COLUMN: ..." with 1-based line and column.
absl::StatusOr<v1::PolicySet> ParsePolicySetText(absl::string_view text,
                                                 absl::string_view source_name);

// Reads and parses a file. Errors: the errno of a failed open/read (NotFound
// for a missing file, PermissionDenied, ...), or Malformed as above.
absl::StatusOr<v1::PolicySet> LoadPolicySetFile(const std::string& path);

}  // namespace sandfence

#endif  // SANDFENCE_POLICY_POLICY_LOADER_H_
