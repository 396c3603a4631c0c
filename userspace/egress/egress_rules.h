// Writing and deleting a sandbox's rule entries in the egress maps
// (batched where the kernel has batch operations). Private to
// userspace/egress.
#ifndef SANDFENCE_EGRESS_EGRESS_RULES_H_
#define SANDFENCE_EGRESS_EGRESS_RULES_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sandfence {

// A failed map write: a full map is Unavailable (retry later), anything
// else carries its errno.
absl::Status MapWriteError(int err, absl::string_view map_name);

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_EGRESS_RULES_H_
