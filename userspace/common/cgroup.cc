#include "common/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace sandfence {
namespace {

constexpr long kCgroup2SuperMagic = 0x63677270;
constexpr uint64_t kInitialCgroupNamespace =
    0xEFFFFFFBu;  // PROC_CGROUP_INIT_INO

absl::StatusOr<std::string> Canonical(const std::string& path) {
  struct FreeDeleter {
    void operator()(char* p) const { ::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> real(::realpath(path.c_str(), nullptr));
  if (real == nullptr) {
    return ErrnoError(errno, absl::StrCat("realpath ", path));
  }
  return std::string(real.get());
}

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ", path));
  if (::write(fd.get(), data.data(), data.size()) < 0) {
    return ErrnoError(errno, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

bool Populated(const std::string& path) {
  std::ifstream events(path + "/cgroup.events");
  if (!events) return false;  // gone already
  std::string line;
  while (std::getline(events, line)) {
    if (line == "populated 0") return false;
  }
  return true;
}

// Removes descendants first: rmdir fails on a cgroup with children.
void RemoveTree(const std::string& path) {
  if (DIR* dir = ::opendir(path.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(dir)) {
      if (e->d_type == DT_DIR && e->d_name[0] != '.') {
        children.push_back(absl::StrCat(path, "/", e->d_name));
      }
    }
    ::closedir(dir);
    for (const auto& child : children) RemoveTree(child);
  }
  ::rmdir(path.c_str());
}

}  // namespace

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
  return Rejected(
      absl::StrCat("no cgroup v2 hierarchy is mounted (", mounts_path,
                   " has no cgroup2 entry); sandfence needs cgroup v2"));
}

absl::StatusOr<CgroupRef> InspectCgroup(const std::string& dir,
                                        const std::string& mounts_path) {
  absl::StatusOr<std::string> root = FindCgroup2Mount(mounts_path);
  if (!root.ok()) return root.status();
  absl::StatusOr<std::string> root_real = Canonical(*root);
  if (!root_real.ok()) return root_real.status();
  absl::StatusOr<std::string> real = Canonical(dir);
  if (!real.ok()) return real.status();

  struct statfs fs {};
  if (::statfs(real->c_str(), &fs) != 0) {
    return ErrnoError(errno, absl::StrCat("statfs ", *real));
  }
  if (fs.f_type != kCgroup2SuperMagic) {
    return Malformed(absl::StrCat(*real, " is not a cgroup v2 directory"));
  }
  struct stat st {};
  if (::stat(real->c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", *real));
  }
  CgroupRef cg;
  cg.path = *real;
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

absl::Status CheckCgroupLevelsAbsolute(const std::string& mounts_path) {
  struct stat ns {};
  if (::stat("/proc/self/ns/cgroup", &ns) == 0 &&
      static_cast<uint64_t>(ns.st_ino) != kInitialCgroupNamespace) {
    return Rejected(
        "the process guard needs the host's cgroup namespace: inside another "
        "one (a container) cgroup levels cannot be told; run sandfence on "
        "the host, or use --guard off");
  }
  absl::StatusOr<std::string> mount_point = FindCgroup2Mount(mounts_path);
  if (!mount_point.ok()) return mount_point.status();
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mount-point ... - fstype ...
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 5 || f[4] != *mount_point) continue;
    if (line.find(" - cgroup2 ") == std::string::npos) continue;
    if (f[3] != "/") {
      return Rejected(absl::StrCat(
          "the process guard needs a cgroup2 mount of the whole hierarchy; ",
          *mount_point, " shows only ", f[3]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CgroupPathOfId(uint64_t cgroup_id) {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  if (!mount.ok()) return mount.status();
  UniqueFd root(::open(mount->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return ErrnoError(errno, absl::StrCat("open ", *mount));
  // kernfs file handles: type FILEID_KERNFS, the 64-bit node id.
  struct {
    struct file_handle fh;
    uint64_t id;
  } handle{};
  handle.fh.handle_bytes = sizeof(uint64_t);
  handle.fh.handle_type = 0xfe;  // FILEID_KERNFS
  std::memcpy(handle.fh.f_handle, &cgroup_id, sizeof(cgroup_id));
  UniqueFd dir(::open_by_handle_at(root.get(), &handle.fh,
                                   O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    if (errno == ESTALE || errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("no cgroup with id ", cgroup_id, " (it is gone)"));
    }
    return ErrnoError(errno, absl::StrCat("open cgroup ", cgroup_id));
  }
  char path[4096];
  const std::string link = absl::StrCat("/proc/self/fd/", dir.get());
  const ssize_t n = ::readlink(link.c_str(), path, sizeof(path) - 1);
  if (n < 0) return ErrnoError(errno, absl::StrCat("readlink ", link));
  std::string found(path, static_cast<size_t>(n));
  // A dentry the handle could not connect to the mount reads as a path
  // relative to the hierarchy's root.
  if (!absl::StartsWith(found, *mount)) found = absl::StrCat(*mount, found);
  return found;
}

absl::StatusOr<std::string> CgroupOfPid(int pid) {
  std::string file = absl::StrCat("/proc/", pid, "/cgroup");
  std::ifstream in(file);
  if (!in) return ErrnoError(errno, absl::StrCat("cannot read ", file));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "0::")) return line.substr(3);
  }
  return absl::NotFoundError(absl::StrCat(file, " has no cgroup v2 entry"));
}

absl::StatusOr<Cgroup> Cgroup::OpenAs(const std::string& path, bool owned) {
  absl::StatusOr<CgroupRef> ref = InspectCgroup(path);
  if (!ref.ok()) return ref.status();
  UniqueFd dir(::open(ref->path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return ErrnoError(errno, absl::StrCat("open cgroup ", ref->path));
  // The directory opened is the one inspected, not one made since.
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0 ||
      static_cast<uint64_t>(st.st_ino) != ref->id) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", ref->path, " was replaced while opened"));
  }
  return Cgroup(*std::move(ref), std::move(dir), owned);
}

absl::StatusOr<Cgroup> Cgroup::Create(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    return ErrnoError(errno, absl::StrCat("create cgroup ", path));
  }
  absl::StatusOr<Cgroup> cg = OpenAs(path, /*owned=*/true);
  if (!cg.ok()) ::rmdir(path.c_str());
  return cg;
}

absl::StatusOr<Cgroup> Cgroup::Open(const std::string& path) {
  return OpenAs(path, /*owned=*/false);
}

absl::StatusOr<Cgroup> Cgroup::Adopt(const std::string& path) {
  return OpenAs(path, /*owned=*/true);
}

Cgroup& Cgroup::operator=(Cgroup&& other) {
  if (this != &other) {
    if (owned_) Remove().IgnoreError();
    ref_ = std::move(other.ref_);
    dir_ = std::move(other.dir_);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

Cgroup::~Cgroup() {
  if (owned_) Remove().IgnoreError();
}

absl::Status Cgroup::Remove() {
  if (!owned_) return absl::FailedPreconditionError("cgroup is not owned");
  owned_ = false;
  dir_.reset();
  return KillAndRemoveCgroup(ref_.path);
}

absl::Status KillCgroupProcesses(const std::string& path) {
  // cgroup.kill (5.14+) kills the whole subtree at once, including
  // processes that fork while being killed.
  absl::Status killed = WriteFile(path + "/cgroup.kill", "1");
  for (int i = 0; i < 500 && Populated(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (Populated(path)) {
    return Unavailable(absl::StrCat(
        "cgroup ", path, " still has processes after cgroup.kill",
        killed.ok() ? "" : absl::StrCat(" (", killed.message(), ")")));
  }
  return absl::OkStatus();
}

absl::Status KillAndRemoveCgroup(const std::string& path) {
  absl::Status killed = KillCgroupProcesses(path);
  RemoveTree(path);
  if (::access(path.c_str(), F_OK) == 0) {
    return absl::InternalError(absl::StrCat(
        "cgroup ", path, " could not be removed",
        killed.ok() ? "" : absl::StrCat(" (", killed.message(), ")")));
  }
  return absl::OkStatus();
}

}  // namespace sandfence
