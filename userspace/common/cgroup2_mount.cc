#include "common/cgroup2_mount.h"

#include <cerrno>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace sandfence {

absl::StatusOr<std::string> FindCgroup2Mount(const std::string& mounts_path) {
  std::ifstream mounts(mounts_path);
  if (!mounts) {
    return ErrnoError(errno, absl::StrCat("cannot read ", mounts_path));
  }
  std::string line;
  while (std::getline(mounts, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() >= 3 && fields[2] == "cgroup2") return fields[1];
  }
  return Rejected(absl::StrCat(
      "no cgroup v2 hierarchy is mounted (", mounts_path,
      " has no cgroup2 entry); sandfence needs cgroup v2"));
}

}  // namespace sandfence
