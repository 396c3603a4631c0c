// Unix socket names in policies: "/absolute/path" or "@abstract".
#ifndef SANDFENCE_COMPILE_UNIX_NAME_H_
#define SANDFENCE_COMPILE_UNIX_NAME_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compile/compiled_policy.h"

namespace sandfence {

// Parses a policy's Unix socket name. A path must be absolute and in the
// form processes connect to (no "//", "/./", "/../", no trailing "/"): the
// kernel hook compares the name a process gives, byte for byte. Both kinds
// fit sockaddr_un (at most 107 bytes). Malformed, naming the text, else.
absl::StatusOr<UnixName> ParseUnixName(absl::string_view text);

}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_UNIX_NAME_H_
