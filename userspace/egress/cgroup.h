// cgroup v2 directories as owned resources: the sandbox a rollout runs in.
#ifndef SANDFENCE_EGRESS_CGROUP_H_
#define SANDFENCE_EGRESS_CGROUP_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/cgroup2_mount.h"  // FindCgroup2Mount
#include "common/unique_fd.h"

namespace sandfence {


// The cgroup id the kernel reports for a cgroup directory
// (bpf_get_current_cgroup_id and friends): its kernfs inode number.
absl::StatusOr<uint64_t> CgroupIdOf(const std::string& path);

// The cgroup v2 path of a process, relative to the mount ("/a/b").
absl::StatusOr<std::string> CgroupOfPid(int pid);

class Cgroup {
 public:
  // Creates path (its parent must exist, path itself must not) and owns it:
  // on destruction every process in it is killed and it is removed.
  static absl::StatusOr<Cgroup> Create(const std::string& path);
  // Refers to an existing cgroup without owning it.
  static absl::StatusOr<Cgroup> Open(const std::string& path);
  // Takes ownership of an existing cgroup that this program created earlier
  // (a restarted daemon adopting its sandboxes).
  static absl::StatusOr<Cgroup> Adopt(const std::string& path);

  Cgroup(Cgroup&& other) noexcept
      : path_(std::move(other.path_)),
        dir_(std::move(other.dir_)),
        id_(other.id_),
        owned_(std::exchange(other.owned_, false)) {}
  Cgroup& operator=(Cgroup&&);
  ~Cgroup();

  const std::string& path() const { return path_; }
  uint64_t id() const { return id_; }
  int fd() const { return dir_.get(); }
  bool owned() const { return owned_; }

  // Kills every process in the cgroup and its descendants, waits until it is
  // empty, and removes it with its descendants. Owned cgroups only.
  absl::Status Remove();
  // Gives up ownership: the cgroup and its processes outlive this object
  // (a daemon that exits while its sandboxes stay enforced).
  void Release() { owned_ = false; }

 private:
  Cgroup(std::string path, UniqueFd dir, uint64_t id, bool owned)
      : path_(std::move(path)), dir_(std::move(dir)), id_(id), owned_(owned) {}

  std::string path_;
  UniqueFd dir_;
  uint64_t id_ = 0;
  bool owned_ = false;
};

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_CGROUP_H_
