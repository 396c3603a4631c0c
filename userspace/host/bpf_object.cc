#include "host/bpf_object.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/bpf_handles.h"
#include "common/status.h"

namespace sandfence {

absl::Status BpfLoadError(int err, absl::string_view what,
                          const LibbpfLogCapture* log) {
  std::string detail = absl::StrCat(std::strerror(err), " (errno ", err, ")");
  if (log != nullptr && !log->first_line().empty()) {
    absl::StrAppend(&detail, " (libbpf: ", log->first_line(),
                    log->verifier_reason().empty() ? "" : "; the verifier: ",
                    log->verifier_reason(), ")");
  }
  if ((err == EPERM || err == EACCES) && ::geteuid() != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": ", detail,
        " (loading BPF programs needs root: CAP_BPF, CAP_NET_ADMIN)"));
  }
  if (err == EMFILE || err == ENFILE || err == ENOMEM) {
    return Unavailable(absl::StrCat(
        what, ": ", detail,
        ": the host's limits (open files, locked memory), not the kernel's "
        "abilities; retry once rollouts end or the limits are raised"));
  }
  return Rejected(absl::StrCat(
      what, ": ", detail,
      ": this kernel cannot run these programs (the verifier's log says "
      "why; SANDFENCE_LIBBPF_DEBUG=1 shows it)"));
}

absl::Status BpfAttachError(int err, absl::string_view what) {
  if (err == EMFILE || err == ENFILE || err == ENOMEM) {
    return Unavailable(absl::StrCat(
        what, ": ", std::strerror(err), " (errno ", err,
        "): each sandbox holds one link fd per hook; raise the process's "
        "RLIMIT_NOFILE (LimitNOFILE= in the unit) or end rollouts"));
  }
  if (err == EPERM && ::geteuid() == 0) {
    return Rejected(absl::StrCat(
        what, ": ", std::strerror(err), " (errno ", err,
        "): the kernel refused another program on this cgroup hook, "
        "usually because one is attached there exclusively (without "
        "BPF_F_ALLOW_MULTI, e.g. by another agent); sandfence's programs "
        "cannot run beside it"));
  }
  return BpfLoadError(err, what);
}

UniqueFd DupFd(int fd) {
  return UniqueFd(fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

uint32_t BpfProgId(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

uint32_t BpfLinkProgId(int fd) {
  bpf_link_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.prog_id;
}

std::vector<std::string> ListPins(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void UnpinDir(const std::string& dir) {
  for (const std::string& name : ListPins(dir)) {
    ::unlink(absl::StrCat(dir, "/", name).c_str());
  }
  ::rmdir(dir.c_str());
}

absl::Status PinFresh(int fd, const std::string& path) {
  ::unlink(path.c_str());
  if (bpf_obj_pin(fd, path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("pin ", path));
  }
  return absl::OkStatus();
}

absl::Status SetMapPinPaths(
    bpf_object* obj,
    absl::FunctionRef<std::string(absl::string_view)> path_of) {
  bpf_map* map;
  bpf_object__for_each_map(map, obj) {
    if (bpf_map__is_internal(map)) continue;
    const std::string path = path_of(bpf_map__name(map));
    if (path.empty()) continue;
    if (bpf_map__set_pin_path(map, path.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("pin path ", path));
    }
  }
  return absl::OkStatus();
}

UniqueFd OpenPinned(const std::string& path) {
  return UniqueFd(bpf_obj_get(path.c_str()));
}

absl::StatusOr<UniqueFd> CreateSlotRing(int rings_fd, uint32_t slot,
                                        const char* name, uint32_t bytes) {
  UniqueFd ring(CreateNamedMap(BPF_MAP_TYPE_RINGBUF, name, 0, 0, bytes));
  if (!ring) {
    if (errno == EINVAL) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring buffer size ", bytes,
                       " is not a power of two of at least a page"));
    }
    return ErrnoError(errno, absl::StrCat("create the event ring ", name));
  }
  const int fd = ring.get();
  if (bpf_map_update_elem(rings_fd, &slot, &fd, BPF_ANY) != 0) {
    return ErrnoError(errno, absl::StrCat("install the event ring ", name,
                                          " in slot ", slot));
  }
  return ring;
}

absl::StatusOr<UniqueFd> RingOfMapSlot(int rings_fd, uint32_t slot) {
  uint32_t id = 0;
  if (bpf_map_lookup_elem(rings_fd, &slot, &id) != 0) {
    return absl::NotFoundError(absl::StrCat("no ring in slot ", slot));
  }
  UniqueFd fd(bpf_map_get_fd_by_id(id));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ring ", id));
  return fd;
}

}  // namespace sandfence
