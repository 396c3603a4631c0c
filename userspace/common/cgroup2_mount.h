// Where the cgroup v2 hierarchy is mounted, read from a mounts table (never
// assumed: hybrid hosts mount it at /sys/fs/cgroup/unified).
#ifndef SANDFENCE_COMMON_CGROUP2_MOUNT_H_
#define SANDFENCE_COMMON_CGROUP2_MOUNT_H_

#include <string>

#include "absl/status/statusor.h"

namespace sandfence {

// Rejected when no cgroup2 is mounted.
absl::StatusOr<std::string> FindCgroup2Mount(
    const std::string& mounts_path = "/proc/mounts");

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_CGROUP2_MOUNT_H_
