#include "guard/sandbox_cgroup.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cgroup2_mount.h"
#include "common/status.h"

namespace sandfence {
namespace {

constexpr long kCgroup2SuperMagic = 0x63677270;

absl::StatusOr<std::string> Canonical(const std::string& path) {
  struct FreeDeleter {
    void operator()(char* p) const { ::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> real(::realpath(path.c_str(), nullptr));
  if (real == nullptr)
    return ErrnoError(errno, absl::StrCat("realpath ", path));
  return std::string(real.get());
}

}  // namespace

absl::StatusOr<std::string> FindCgroup2Root(const std::string& mounts_path) {
  return FindCgroup2Mount(mounts_path);
}

namespace {

// The guard's programs compare absolute levels in the kernel's hierarchy;
// the level is counted here from the mount path. The two agree only in the
// initial cgroup namespace on a mount of the whole hierarchy. Anything else
// would leave the guard matching nothing while saying it runs: refuse.
absl::Status CheckWholeHierarchyVisible(const std::string& mount_point) {
  constexpr uint64_t kInitialCgroupNamespace = 0xEFFFFFFBu;  // PROC_CGROUP_INIT_INO
  struct stat ns;
  if (::stat("/proc/self/ns/cgroup", &ns) == 0 &&
      static_cast<uint64_t>(ns.st_ino) != kInitialCgroupNamespace) {
    return Rejected(
        "the process guard needs the host's cgroup namespace: inside another "
        "one (a container) cgroup levels cannot be told; run sandfence on "
        "the host, or use --guard off");
  }
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mount-point ... - fstype ...
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 5 || f[4] != mount_point) continue;
    if (line.find(" - cgroup2 ") == std::string::npos) continue;
    if (f[3] != "/") {
      return Rejected(absl::StrCat(
          "the process guard needs a cgroup2 mount of the whole hierarchy; ",
          mount_point, " shows only ", f[3]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SandboxCgroup> InspectSandboxCgroup(
    const std::string& dir, const std::string& mounts_path) {
  absl::StatusOr<std::string> root = FindCgroup2Root(mounts_path);
  if (!root.ok()) return root.status();
  if (absl::Status s = CheckWholeHierarchyVisible(*root); !s.ok()) return s;
  absl::StatusOr<std::string> root_real = Canonical(*root);
  if (!root_real.ok()) return root_real.status();
  absl::StatusOr<std::string> real = Canonical(dir);
  if (!real.ok()) return real.status();

  struct statfs fs;
  if (::statfs(real->c_str(), &fs) != 0) {
    return ErrnoError(errno, absl::StrCat("statfs ", *real));
  }
  if (fs.f_type != kCgroup2SuperMagic) {
    return Malformed(absl::StrCat(*real, " is not a cgroup v2 directory"));
  }
  struct stat st;
  if (::stat(real->c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", *real));
  }

  SandboxCgroup cg;
  cg.path = *real;
  // The kernel's cgroup id is the directory's kernfs inode number.
  cg.id = static_cast<uint64_t>(st.st_ino);
  if (*real == *root_real) return cg;  // level 0
  if (!absl::StartsWith(*real, absl::StrCat(*root_real, "/"))) {
    return Malformed(
        absl::StrCat(*real, " is not under the cgroup v2 mount ", *root_real));
  }
  absl::string_view rest = absl::string_view(*real).substr(root_real->size());
  for (absl::string_view part : absl::StrSplit(rest, '/', absl::SkipEmpty())) {
    (void)part;
    ++cg.level;
  }
  return cg;
}

}  // namespace sandfence
