// cgroup v2 directories: where the hierarchy is mounted, how the kernel
// names a cgroup (its id) and how deep it sits (its level), and a cgroup
// directory as an owned resource. The one view of a cgroup that egress, the
// guard and the sandbox lifecycle share.
#ifndef SANDFENCE_COMMON_CGROUP_H_
#define SANDFENCE_COMMON_CGROUP_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandfence {

// Where the cgroup v2 hierarchy is mounted, from a mounts table: never
// assumed (hybrid hosts mount it at /sys/fs/cgroup/unified). Rejected when
// none is mounted.
absl::StatusOr<std::string> FindCgroup2Mount(
    const std::string& mounts_path = "/proc/mounts");

// A cgroup as the kernel names it.
struct CgroupRef {
  std::string path;  // canonical, absolute
  // The id BPF helpers report (bpf_get_current_cgroup_id and friends): the
  // directory's kernfs inode number.
  uint64_t id = 0;
  // Depth below the root of the hierarchy (the root is 0), as the kernel
  // counts it (cgroup->level) when this process sees the whole hierarchy.
  uint32_t level = 0;
};

// The id and level of a cgroup v2 directory. Malformed when it is not one.
absl::StatusOr<CgroupRef> InspectCgroup(
    const std::string& dir, const std::string& mounts_path = "/proc/mounts");

// The guard compares absolute levels in the kernel's hierarchy; levels
// counted from a mount path agree with the kernel's only in the initial
// cgroup namespace, on a mount of the whole hierarchy. Rejected elsewhere.
absl::Status CheckCgroupLevelsAbsolute(
    const std::string& mounts_path = "/proc/mounts");

// The absolute path of the cgroup v2 directory whose id is cgroup_id
// (through a file handle: cgroup ids are kernfs node ids). NotFound once the
// cgroup is gone. Needs CAP_DAC_READ_SEARCH.
absl::StatusOr<std::string> CgroupPathOfId(uint64_t cgroup_id);

// The cgroup v2 path of a process, relative to the mount ("/a/b").
absl::StatusOr<std::string> CgroupOfPid(int pid);

// A cgroup directory held open. An owned one (created here, or adopted from
// an earlier sandfence process) is killed and removed on destruction unless
// released.
class Cgroup {
 public:
  // Creates path (its parent must exist, path itself must not).
  static absl::StatusOr<Cgroup> Create(const std::string& path);
  // Refers to an existing cgroup without owning it.
  static absl::StatusOr<Cgroup> Open(const std::string& path);
  // Takes ownership of an existing cgroup that sandfence created earlier.
  static absl::StatusOr<Cgroup> Adopt(const std::string& path);

  Cgroup(Cgroup&& other) noexcept
      : ref_(std::move(other.ref_)),
        dir_(std::move(other.dir_)),
        owned_(std::exchange(other.owned_, false)) {}
  Cgroup& operator=(Cgroup&&);
  ~Cgroup();

  const CgroupRef& ref() const { return ref_; }
  const std::string& path() const { return ref_.path; }
  uint64_t id() const { return ref_.id; }
  uint32_t level() const { return ref_.level; }
  int fd() const { return dir_.get(); }
  bool owned() const { return owned_; }

  // Kills every process in the cgroup and its descendants (cgroup.kill),
  // waits until it is empty, and removes it with its descendants. Owned
  // cgroups only.
  absl::Status Remove();
  // Gives up ownership: the cgroup and its processes outlive this object.
  void Release() { owned_ = false; }

 private:
  static absl::StatusOr<Cgroup> OpenAs(const std::string& path, bool owned);
  Cgroup(CgroupRef ref, UniqueFd dir, bool owned)
      : ref_(std::move(ref)), dir_(std::move(dir)), owned_(owned) {}

  CgroupRef ref_;
  UniqueFd dir_;
  bool owned_ = false;
};

// Kills every process of the cgroup at path and its descendants
// (cgroup.kill) and waits until it is empty; Unavailable if it does not
// empty in time.
absl::Status KillCgroupProcesses(const std::string& path);
// KillCgroupProcesses, then removes the directories (for a cgroup no
// object holds: a dead sandfence's sandbox).
absl::Status KillAndRemoveCgroup(const std::string& path);

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_CGROUP_H_
