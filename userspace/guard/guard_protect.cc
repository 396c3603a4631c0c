#include "guard/guard_protect.h"

#include <bpf/bpf.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace sandfence {
namespace {

sf_guard_inode InodeOf(const struct stat& st) {
  sf_guard_inode k = {};
  k.ino = st.st_ino;
  k.dev = KernelDev(st.st_dev);
  return k;
}

sf_guard_inode DevMarker(uint32_t dev) {
  sf_guard_inode k = {};
  k.dev = dev;
  return k;
}

}  // namespace

uint32_t KernelDev(dev_t dev) {
  return (static_cast<uint32_t>(major(dev)) << 20) |
         static_cast<uint32_t>(minor(dev));
}

absl::StatusOr<ProtectedChain> ResolveProtected(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return Malformed(
        absl::StrCat("protected path \"", path, "\": must be absolute"));
  }
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    return ErrnoError(errno, absl::StrCat("protected path ", path));
  }
  ProtectedChain chain;
  chain.canonical = buf;
  struct stat st;
  if (::stat("/", &st) != 0) return ErrnoError(errno, "stat /");
  sf_guard_inode parent = InodeOf(st);
  std::string prefix;
  for (absl::string_view name :
       absl::StrSplit(chain.canonical, '/', absl::SkipEmpty())) {
    if (name.size() >= SF_GUARD_PROTNAME_LEN) {
      return Malformed(absl::StrCat(
          "protected path ", chain.canonical, ": component \"", name, "\" is ",
          name.size(), " bytes (at most ", SF_GUARD_PROTNAME_LEN - 1, ")"));
    }
    absl::StrAppend(&prefix, "/", name);
    if (::stat(prefix.c_str(), &st) != 0) {
      return ErrnoError(errno, absl::StrCat("stat ", prefix));
    }
    sf_guard_dirent d = {};
    d.parent = parent;
    std::memcpy(d.name, name.data(), name.size());
    sf_guard_inode child = InodeOf(st);
    chain.dirents.emplace_back(d, child);
    parent = child;
  }
  chain.object = parent;  // "/" itself when the path is "/"
  return chain;
}

absl::Status ProtectedObjects::Ref(const sf_guard_inode& inode) {
  int& refs = inode_refs_[{inode.dev, inode.ino}];
  if (refs == 0) {
    __u32 one = 1;
    if (bpf_map_update_elem(inodes_fd_, &inode, &one, BPF_ANY) != 0) {
      int err = errno;
      inode_refs_.erase({inode.dev, inode.ino});
      return ErrnoError(err, "sf_gprot");
    }
  }
  ++refs;
  return absl::OkStatus();
}

absl::Status ProtectedObjects::Unref(const sf_guard_inode& inode) {
  auto it = inode_refs_.find({inode.dev, inode.ino});
  if (it == inode_refs_.end()) return absl::OkStatus();
  if (--it->second > 0) return absl::OkStatus();
  inode_refs_.erase(it);
  if (bpf_map_delete_elem(inodes_fd_, &inode) != 0 && errno != ENOENT) {
    return ErrnoError(errno, "sf_gprot");
  }
  return absl::OkStatus();
}

absl::Status ProtectedObjects::Ref(const sf_guard_dirent& d,
                                   const sf_guard_inode& child) {
  DirentKey key{d.parent.dev, d.parent.ino, d.name};
  int& refs = dirent_refs_[key];
  if (refs == 0) {
    if (bpf_map_update_elem(dirents_fd_, &d, &child, BPF_ANY) != 0) {
      int err = errno;
      dirent_refs_.erase(key);
      return ErrnoError(err, "sf_gprotn");
    }
  }
  ++refs;
  return absl::OkStatus();
}

absl::Status ProtectedObjects::Unref(const sf_guard_dirent& d) {
  auto it = dirent_refs_.find({d.parent.dev, d.parent.ino, d.name});
  if (it == dirent_refs_.end()) return absl::OkStatus();
  if (--it->second > 0) return absl::OkStatus();
  dirent_refs_.erase(it);
  if (bpf_map_delete_elem(dirents_fd_, &d) != 0 && errno != ENOENT) {
    return ErrnoError(errno, "sf_gprotn");
  }
  return absl::OkStatus();
}

// Undoes what Add() did for a chain: its object, its device's marker and
// its first `dirents` directory entries.
void ProtectedObjects::Release(const ProtectedChain& chain, size_t dirents) {
  (void)Unref(chain.object);
  (void)Unref(DevMarker(chain.object.dev));
  for (size_t i = 0; i < dirents && i < chain.dirents.size(); ++i) {
    (void)Unref(chain.dirents[i].first);
  }
}

absl::Status ProtectedObjects::Add(const std::string& path) {
  absl::StatusOr<ProtectedChain> chain = ResolveProtected(path);
  if (!chain.ok()) return chain.status();
  if (paths_.count(chain->canonical) != 0) return absl::OkStatus();
  // The device marker first: the object is judged as soon as it is in.
  if (absl::Status s = Ref(DevMarker(chain->object.dev)); !s.ok()) return s;
  if (absl::Status s = Ref(chain->object); !s.ok()) {
    (void)Unref(DevMarker(chain->object.dev));
    return s;
  }
  for (size_t i = 0; i < chain->dirents.size(); ++i) {
    const auto& [d, child] = chain->dirents[i];
    if (absl::Status s = Ref(d, child); !s.ok()) {
      Release(*chain, i);
      return s;
    }
  }
  std::string key = chain->canonical;
  paths_.emplace(std::move(key), *std::move(chain));
  return absl::OkStatus();
}

absl::Status ProtectedObjects::Remove(const std::string& path) {
  auto it = paths_.find(path);
  if (it == paths_.end()) {
    // Given as it was spelled to Add(): find it by its canonical form.
    char buf[PATH_MAX];
    if (::realpath(path.c_str(), buf) != nullptr) it = paths_.find(buf);
  }
  if (it == paths_.end()) {
    return absl::NotFoundError(
        absl::StrCat("path ", path, " is not protected"));
  }
  Release(it->second, it->second.dirents.size());
  paths_.erase(it);
  return absl::OkStatus();
}

}  // namespace sandfence
