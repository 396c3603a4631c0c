// A sandbox as the guard identifies it: a cgroup v2 directory, by the id
// the kernel uses (its kernfs inode number) and its depth below the root of
// the cgroup v2 hierarchy (the BPF programs look a task's sandbox up only
// at the depths where sandboxes exist).
#ifndef SANDFENCE_GUARD_SANDBOX_CGROUP_H_
#define SANDFENCE_GUARD_SANDBOX_CGROUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sandfence {

struct SandboxCgroup {
  std::string path;  // canonical, absolute
  uint64_t id = 0;
  uint32_t level = 0;  // 0 is the hierarchy's root
};

// Where the cgroup v2 hierarchy is mounted, from a mounts table: never
// assumed (hybrid hosts mount it at /sys/fs/cgroup/unified). Rejected when
// there is none.
absl::StatusOr<std::string> FindCgroup2Root(
    const std::string& mounts_path = "/proc/mounts");

// The id and level of a cgroup directory under the cgroup v2 mount.
absl::StatusOr<SandboxCgroup> InspectSandboxCgroup(
    const std::string& dir, const std::string& mounts_path = "/proc/mounts");

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_SANDBOX_CGROUP_H_
