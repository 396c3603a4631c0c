// sha256 of bytes, as lower-case hex: the identity of a policy, a BPF object.
#ifndef SANDFENCE_COMMON_SHA256_H_
#define SANDFENCE_COMMON_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace sandfence {

// "" only if libcrypto cannot compute sha256 at all.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_SHA256_H_
