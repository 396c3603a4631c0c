// Printing compiled policies: one rule per line for people, JSON for
// programs. Both are deterministic, so they can be golden-tested.
#ifndef SANDFENCE_COMPILE_FORMAT_H_
#define SANDFENCE_COMPILE_FORMAT_H_

#include <string>

#include "compile/compiled_policy.h"

namespace sandfence {

// "10.1.2.3:8000", "10.0.0.0/8:443", "[2001:db8::1]:8000-8010".
std::string FormatDestination(const Rule& rule);

// The text form:
//   policy "gym-default"  sha256:3f...
//   setup  mode inherit (no restrictions)
//   agent  mode model_only
//   agent  allow tcp 10.1.2.3:8000  model.internal
//   agent  drop  tool "search" (https://search.internal): model_only drops ...
//   agent  deny  all other traffic
// Columns are aligned with spaces; every line ends in '\n'.
std::string FormatCompiledPolicyText(const CompiledPolicy& policy);

// The JSON form: an object with "policy", "content_hash" and "phases", each
// phase with "name", "network_access", "restricted", "rules", "dropped",
// "loopback", "guard", "audit_allowed". Ends in '\n'.
std::string FormatCompiledPolicyJson(const CompiledPolicy& policy);


}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_FORMAT_H_
