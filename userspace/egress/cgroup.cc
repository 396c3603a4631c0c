#include "egress/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace sandfence {
namespace {

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


absl::StatusOr<uint64_t> CgroupIdOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", path));
  }
  return static_cast<uint64_t>(st.st_ino);
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

absl::StatusOr<Cgroup> Cgroup::Create(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    return ErrnoError(errno, absl::StrCat("create cgroup ", path));
  }
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    int err = errno;
    ::rmdir(path.c_str());
    return ErrnoError(err, absl::StrCat("open cgroup ", path));
  }
  absl::StatusOr<uint64_t> id = CgroupIdOf(path);
  if (!id.ok()) {
    ::rmdir(path.c_str());
    return id.status();
  }
  return Cgroup(path, std::move(dir), *id, /*owned=*/true);
}

absl::StatusOr<Cgroup> Cgroup::Open(const std::string& path) {
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return ErrnoError(errno, absl::StrCat("open cgroup ", path));
  absl::StatusOr<uint64_t> id = CgroupIdOf(path);
  if (!id.ok()) return id.status();
  return Cgroup(path, std::move(dir), *id, /*owned=*/false);
}

absl::StatusOr<Cgroup> Cgroup::Adopt(const std::string& path) {
  absl::StatusOr<Cgroup> cgroup = Open(path);
  if (cgroup.ok()) cgroup->owned_ = true;
  return cgroup;
}

Cgroup& Cgroup::operator=(Cgroup&& other) {
  if (this != &other) {
    if (owned_) Remove().IgnoreError();
    path_ = std::move(other.path_);
    dir_ = std::move(other.dir_);
    id_ = other.id_;
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
  // cgroup.kill (5.14+) kills the whole subtree at once, including
  // processes that fork while being killed.
  absl::Status killed = WriteFile(path_ + "/cgroup.kill", "1");
  for (int i = 0; i < 500 && Populated(path_); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  RemoveTree(path_);
  if (::access(path_.c_str(), F_OK) == 0) {
    return absl::InternalError(
        absl::StrCat("cgroup ", path_, " could not be removed",
                     killed.ok() ? "" : absl::StrCat(" (", killed.message(), ")")));
  }
  return absl::OkStatus();
}

}  // namespace sandfence
