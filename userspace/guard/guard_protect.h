// Protected objects: the file system objects no guarded sandbox may change
// (sandfence's pin directory, state and records directories, daemon
// socket), as the guard's BPF maps hold them (bpf/guard/guard_abi.h):
//
//   sf_gprot   (dev, ino) of each protected object, and (dev, 0) for each
//              device that holds one
//   sf_gprotn  (parent (dev, ino), name) -> child (dev, ino) for every
//              directory entry on the way from "/" to a protected object,
//              so that signal mode can follow a path string by name
//
// Entries several paths share are counted, so that removing one path keeps
// what another still needs.
#ifndef SANDFENCE_GUARD_GUARD_PROTECT_H_
#define SANDFENCE_GUARD_GUARD_PROTECT_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "guard/guard_abi.h"

namespace sandfence {

// The kernel's encoding of a device number (super_block.s_dev: major << 20
// | minor), from the one stat() reports.
uint32_t KernelDev(dev_t dev);

// What protecting one path puts in the maps.
struct ProtectedChain {
  std::string canonical;  // realpath()
  sf_guard_inode object = {};
  // From "/" down: each entry's parent, name and child.
  std::vector<std::pair<sf_guard_dirent, sf_guard_inode>> dirents;
};

// Resolves a path (it must exist) into its chain. Malformed for a relative
// or empty path and for a component of SF_GUARD_PROTNAME_LEN bytes or more;
// the errno of a failed realpath()/stat() otherwise.
absl::StatusOr<ProtectedChain> ResolveProtected(const std::string& path);

class ProtectedObjects {
 public:
  // The two maps' fds (owned by the guard's skeleton).
  ProtectedObjects(int inodes_fd, int dirents_fd)
      : inodes_fd_(inodes_fd), dirents_fd_(dirents_fd) {}

  // Adding a path again is a no-op; removing one never added is NotFound.
  absl::Status Add(const std::string& path);
  absl::Status Remove(const std::string& path);

  size_t size() const { return paths_.size(); }

 private:
  using InodeKey = std::pair<uint32_t, uint64_t>;  // dev, ino
  using DirentKey = std::tuple<uint32_t, uint64_t, std::string>;

  absl::Status Ref(const sf_guard_inode& inode);
  absl::Status Unref(const sf_guard_inode& inode);
  absl::Status Ref(const sf_guard_dirent& d, const sf_guard_inode& child);
  absl::Status Unref(const sf_guard_dirent& d);
  void Release(const ProtectedChain& chain, size_t dirents);

  int inodes_fd_;
  int dirents_fd_;
  std::map<std::string, ProtectedChain> paths_;  // by canonical path
  std::map<InodeKey, int> inode_refs_;           // objects and dev markers
  std::map<DirentKey, int> dirent_refs_;
};

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_GUARD_PROTECT_H_
