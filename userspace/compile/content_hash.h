// The identity of an effective policy, for records: equal policies hash
// equal, whatever their comments or field order in the file.
#ifndef SANDFENCE_COMPILE_CONTENT_HASH_H_
#define SANDFENCE_COMPILE_CONTENT_HASH_H_

#include <string>

#include "sandfence/v1/policy.pb.h"

namespace sandfence {

// Lower-case hex sha256 of the deterministic binary serialization; "" only
// if libcrypto cannot compute sha256 at all.
std::string PolicyContentHash(const v1::PolicySet& policy);

}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_CONTENT_HASH_H_
