#include "confine/landlock.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status.h"

namespace sandfence::confine {
namespace {

// struct landlock_ruleset_attr as of ABI 6. Debian 12's UAPI header has
// only its first member; the kernel takes any size from the first member's
// end on (copy_struct_from_user), so we pass only what we fill.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4; never used: egress is BPF's
  uint64_t scoped;              // ABI 6
};
static_assert(sizeof(RulesetAttr) == 24);

// A walk never adds more rules than this: a directory of excessive size on
// the way to an excluded path is a plan to rethink, not to load.
constexpr size_t kMaxRules = 1 << 16;

int CreateRulesetCall(const RulesetAttr* attr, size_t size, uint32_t flags) {
  return static_cast<int>(
      ::syscall(SYS_landlock_create_ruleset, attr, size, flags));
}

// The trie of excluded paths: one node per path component.
struct Node {
  std::map<std::string, std::unique_ptr<Node>> children;
  bool excluded = false;
  uint64_t keep = ~0ULL;  // what this node's subtree keeps, when excluded
};

// The rights the most restricted exclusion in this subtree keeps (those a
// rule on the subtree's root may grant without leaking into it).
uint64_t Floor(const Node& node, uint64_t allowed) {
  if (node.excluded) allowed &= node.keep;
  uint64_t floor = allowed;
  for (const auto& [name, child] : node.children) {
    floor &= Floor(*child, allowed);
  }
  return floor;
}

bool IsProcfs(int fd) {
  struct statfs sfs;
  return ::fstatfs(fd, &sfs) == 0 &&
         static_cast<unsigned long>(sfs.f_type) == PROC_SUPER_MAGIC;
}

// (st_dev, st_ino) of a directory or file.
using InodeKey = std::pair<dev_t, ino_t>;

class Walker {
 public:
  Walker(uint64_t handled, bool list_ancestors, int ruleset_fd, RulePlan& plan)
      : handled_(handled),
        list_ancestors_(list_ancestors),
        ruleset_fd_(ruleset_fd),
        plan_(plan) {}

  // The inodes on the way to every exclusion, and of the exclusions: an
  // entry elsewhere with one of them is the same place under another name.
  void Protect(const Node& node, const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0)
      protected_.insert({st.st_dev, st.st_ino});
    for (const auto& [name, child] : node.children) {
      Protect(*child, path == "/" ? absl::StrCat("/", name)
                                  : absl::StrCat(path, "/", name));
    }
  }

  // `fd` is `path` opened O_PATH; `allowed` what this subtree may get at
  // most; `inherited` what rules above it already grant.
  absl::Status Walk(const std::string& path, int fd, const Node& node,
                    uint64_t allowed, uint64_t inherited) {
    if (node.excluded) allowed &= node.keep;
    if (node.children.empty()) return Add(path, fd, true, allowed, inherited);

    const uint64_t floor = Floor(node, allowed);
    uint64_t self = floor;
    if (list_ancestors_) self |= allowed & kFsReadDir;
    if (IsProcfs(fd)) {
      // Never enumerate procfs: its pid directories come and go, and
      // rules on them would bind processes, not places. The whole mount
      // gets what its most restricted exclusion keeps.
      plan_.widened.push_back(path);
      return Add(path, fd, true, floor, inherited);
    }
    if (absl::Status s = Add(path, fd, true, self, inherited); !s.ok()) {
      return s;
    }
    inherited |= self;

    UniqueFd dir(::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return ErrnoError(errno, absl::StrCat("list ", path));
    DIR* d = ::fdopendir(dir.get());
    if (d == nullptr) return ErrnoError(errno, absl::StrCat("list ", path));
    dir.release();
    std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      const absl::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
    if (errno != 0) return ErrnoError(errno, absl::StrCat("list ", path));

    for (const std::string& name : names) {
      const std::string child_path =
          path == "/" ? absl::StrCat("/", name) : absl::StrCat(path, "/", name);
      // O_NOFOLLOW: a symlink here may point into the excluded subtree;
      // what it names gets the rights of where it really is.
      UniqueFd child(
          ::openat(fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (!child) {
        if (errno == ENOENT) continue;  // gone since we listed it
        return ErrnoError(errno, absl::StrCat("open ", child_path));
      }
      struct stat st;
      if (::fstat(child.get(), &st) != 0) {
        return ErrnoError(errno, absl::StrCat("stat ", child_path));
      }
      if (S_ISLNK(st.st_mode)) continue;
      auto it = node.children.find(name);
      if (it == node.children.end() &&
          protected_.count({st.st_dev, st.st_ino}) != 0) {
        plan_.aliases_refused.push_back(child_path);
        continue;
      }
      if (it == node.children.end()) {
        if (absl::Status s = Add(child_path, child.get(), S_ISDIR(st.st_mode),
                                 allowed, inherited);
            !s.ok()) {
          return s;
        }
        continue;
      }
      if (!S_ISDIR(st.st_mode) && !it->second->children.empty()) {
        continue;  // canonical paths make this impossible
      }
      if (absl::Status s =
              Walk(child_path, child.get(), *it->second, allowed, inherited);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  // Adds the rule through the fd the walk opened: a path reopened later
  // could have been swapped for a symlink by a process already running.
  absl::Status Add(const std::string& path, int fd, bool directory,
                   uint64_t rights, uint64_t inherited) {
    rights &= handled_;
    if (!directory) rights &= kFsFileRights;
    // A rule that grants nothing the rules above do not is left out.
    if ((rights & ~inherited) == 0) return absl::OkStatus();
    if (plan_.rules.size() >= kMaxRules) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "landlock: more than ", kMaxRules,
          " rules to exclude the planned paths (a directory on the way to "
          "one is too large): stopped at ",
          path));
    }
    plan_.rules.push_back({path, rights, directory});
    if (ruleset_fd_ < 0) return absl::OkStatus();
    struct landlock_path_beneath_attr beneath {};
    beneath.allowed_access = rights;
    beneath.parent_fd = fd;
    if (::syscall(SYS_landlock_add_rule, ruleset_fd_,
                  LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
      return ErrnoError(errno,
                        absl::StrCat("landlock_add_rule ", path, " (rights 0x",
                                     absl::Hex(rights), ")"));
    }
    return absl::OkStatus();
  }

  uint64_t handled_;
  bool list_ancestors_;
  int ruleset_fd_;
  RulePlan& plan_;
  std::set<InodeKey> protected_;
};

// Decodes the octal escapes of a mountinfo field (\040 is a space).
std::string Unescape(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const absl::string_view oct = field.substr(i + 1, 3);
      if (oct[0] >= '0' && oct[0] <= '3' && oct[1] >= '0' && oct[1] <= '7' &&
          oct[2] >= '0' && oct[2] <= '7') {
        out.push_back(static_cast<char>((oct[0] - '0') * 64 +
                                        (oct[1] - '0') * 8 + (oct[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

}  // namespace

uint64_t FsRightsOfAbi(int abi) {
  if (abi < 1) return 0;
  uint64_t rights = (kFsMakeSym << 1) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

uint64_t FsWriteRightsOfAbi(int abi) {
  return FsRightsOfAbi(abi) & ~kFsReadRights;
}

uint64_t ScopesOfAbi(int abi) {
  return abi >= 6 ? (kScopeAbstractUnixSocket | kScopeSignal) : 0;
}

LandlockAbi ProbeLandlockAbi() {
  LandlockAbi abi;
  const int version =
      CreateRulesetCall(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (version < 0) {
    abi.error = errno;
    switch (abi.error) {
      case ENOSYS:
        abi.reason = "landlock is not built into this kernel (ENOSYS)";
        break;
      case EOPNOTSUPP:
        abi.reason =
            "landlock is built but not enabled: it is not in the kernel's "
            "LSM list (lsm= boot parameter; EOPNOTSUPP)";
        break;
      default:
        abi.reason = std::string(
            ErrnoError(abi.error, "landlock_create_ruleset(VERSION)")
                .message());
    }
    return abi;
  }
  abi.version = version;
  // Kernels before the errata query answer EINVAL: no errata known.
  const int errata =
      CreateRulesetCall(nullptr, 0, LANDLOCK_CREATE_RULESET_ERRATA);
  if (errata > 0) abi.errata = static_cast<uint64_t>(errata);
  return abi;
}

absl::StatusOr<RulePlan> PlanRules(const std::vector<Exclusion>& exclusions,
                                   uint64_t handled, bool list_ancestors,
                                   int ruleset_fd, uint64_t withheld) {
  RulePlan plan;
  Node root;
  // Canonical paths: the walk never follows a symlink, so an exclusion
  // named through one (/var/run/x for /run/x) would miss its target.
  std::vector<Exclusion> canonical;
  for (const Exclusion& e : exclusions) {
    if (e.path.empty() || e.path[0] != '/') {
      return Malformed(absl::StrCat("confinement: excluded path \"", e.path,
                                    "\" is not absolute"));
    }
    char resolved[PATH_MAX];
    if (::realpath(e.path.c_str(), resolved) == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) {
        plan.skipped.push_back(e.path);
        continue;
      }
      return ErrnoError(errno, absl::StrCat("resolve excluded path ", e.path));
    }
    canonical.push_back({resolved, e.keep & handled});
  }
  for (const Exclusion& e : canonical) {
    Node* node = &root;
    for (absl::string_view part :
         absl::StrSplit(e.path, '/', absl::SkipEmpty())) {
      std::unique_ptr<Node>& child = node->children[std::string(part)];
      if (!child) child = std::make_unique<Node>();
      node = child.get();
    }
    node->excluded = true;
    node->keep &= e.keep;
  }
  // An exclusion beneath one at least as strict adds nothing: drop it, so
  // the walk does not enumerate the outer one (/sys for a cgroup2 mount
  // below it).
  struct Pruner {
    static void Prune(Node& node, uint64_t allowed) {
      if (node.excluded) allowed &= node.keep;
      for (auto it = node.children.begin(); it != node.children.end();) {
        Node& child = *it->second;
        Prune(child, allowed);
        if (child.children.empty() &&
            (!child.excluded || (child.keep & allowed) == allowed)) {
          it = node.children.erase(it);
        } else {
          ++it;
        }
      }
    }
    static void Collect(const Node& node, const std::string& path,
                        uint64_t allowed, std::vector<Exclusion>& out) {
      if (node.excluded) {
        allowed &= node.keep;
        out.push_back({path.empty() ? "/" : path, allowed});
      }
      for (const auto& [name, child] : node.children) {
        Collect(*child, absl::StrCat(path, "/", name), allowed, out);
      }
    }
  };
  Pruner::Prune(root, handled);
  Pruner::Collect(root, "", handled, plan.applied);

  UniqueFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return ErrnoError(errno, "open /");
  Walker walker(handled, list_ancestors, ruleset_fd, plan);
  walker.Protect(root, "/");
  if (absl::Status s = walker.Walk("/", fd.get(), root, handled & ~withheld, 0);
      !s.ok()) {
    return s;
  }
  return plan;
}

uint64_t RightsBeneath(const std::vector<Exclusion>& applied,
                       const std::string& path, uint64_t handled,
                       uint64_t withheld) {
  uint64_t rights = handled & ~withheld;
  const auto beneath = [](const std::string& inner, const std::string& outer) {
    return outer == "/" || inner == outer ||
           (inner.size() > outer.size() && inner.starts_with(outer) &&
            inner[outer.size()] == '/');
  };
  for (const Exclusion& e : applied) {
    // An exclusion above `path` bounds it; one below bounds a rule on it.
    if (beneath(path, e.path) || beneath(e.path, path)) rights &= e.keep;
  }
  return rights;
}

namespace {

// Character devices, by their path under /dev, that a sandbox must not
// open even as root ('*' matches within one path component):
//   mem, kmem, port       physical memory and I/O ports
//   sg*, bsg/*, ng*       raw SCSI and NVMe commands to disks
//   mtd*                  raw flash
//   userfaultfd           userfaultfd without the system call seccomp refuses
//   uinput, uhid          virtual keyboards and mice: input to the host's
//                         sessions
//   vcs*                  the host's virtual console screens
//   watchdog*             opening arms the host's watchdog: a reboot when
//                         nothing feeds it
//   kmsg                  the kernel log (addresses; forged lines)
//   cpu/*/msr             model-specific registers
constexpr const char* kRawCharDevices[] = {
    "mem",         "kmem",   "port", "sg*",  "bsg/*",     "ng*",  "mtd*",
    "userfaultfd", "uinput", "uhid", "vcs*", "watchdog*", "kmsg", "cpu/*/msr",
};

// Glob with '*' matching within one path component.
bool Matches(absl::string_view pattern, absl::string_view name) {
  while (!pattern.empty()) {
    if (pattern[0] == '*') {
      pattern.remove_prefix(1);
      for (size_t i = 0; i <= name.size(); ++i) {
        if (i > 0 && name[i - 1] == '/') break;
        if (Matches(pattern, name.substr(i))) return true;
      }
      return false;
    }
    if (name.empty() || name[0] != pattern[0]) return false;
    pattern.remove_prefix(1);
    name.remove_prefix(1);
  }
  return name.empty();
}

absl::Status CollectRawDevices(const std::string& dir, const std::string& rel,
                               dev_t fs, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError(errno, absl::StrCat("list ", dir));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  while (struct dirent* e = ::readdir(d)) {
    const absl::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(dir, "/", name);
    const std::string sub =
        rel.empty() ? std::string(name) : absl::StrCat(rel, "/", name);
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      continue;  // gone since we listed it
    }
    if (S_ISDIR(st.st_mode)) {
      // Other file systems mounted here (devpts, mqueue, shm) hold no
      // device nodes of the host's.
      if (st.st_dev != fs) continue;
      if (absl::Status s = CollectRawDevices(path, sub, fs, out); !s.ok()) {
        return s;
      }
    } else if (S_ISBLK(st.st_mode)) {
      out.push_back(path);
    } else if (S_ISCHR(st.st_mode)) {
      for (const char* pattern : kRawCharDevices) {
        if (Matches(pattern, sub)) {
          out.push_back(path);
          break;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RawDeviceNodes(
    const std::string& dev) {
  struct stat st;
  std::vector<std::string> out;
  if (::stat(dev.c_str(), &st) != 0) {
    if (errno == ENOENT) return out;
    return ErrnoError(errno, absl::StrCat("stat ", dev));
  }
  if (absl::Status s = CollectRawDevices(dev, "", st.st_dev, out); !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<std::vector<MountEntry>> ReadMountInfo(
    const std::string& mountinfo_path) {
  std::ifstream in(mountinfo_path);
  if (!in) return ErrnoError(errno, absl::StrCat("read ", mountinfo_path));
  std::vector<MountEntry> mounts;
  std::string line;
  while (std::getline(in, line)) {
    // "36 35 98:0 /root /mount/point opts [optional...] - fstype source ..."
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::vector<absl::string_view> head =
        absl::StrSplit(absl::string_view(line).substr(0, sep), ' ');
    std::vector<absl::string_view> tail = absl::StrSplit(
        absl::string_view(line).substr(sep + 3), ' ', absl::SkipEmpty());
    if (head.size() < 5 || tail.empty()) continue;
    mounts.push_back({std::string(head[2]), Unescape(head[3]),
                      Unescape(head[4]), std::string(tail[0])});
  }
  return mounts;
}

std::vector<std::string> MountPointsOfTypes(
    const std::vector<MountEntry>& mounts,
    const std::vector<std::string>& fs_types) {
  std::vector<std::string> points;
  for (const MountEntry& m : mounts) {
    for (const std::string& type : fs_types) {
      if (m.type == type) {
        points.push_back(m.point);
        break;
      }
    }
  }
  return points;
}

namespace {

// `inner` is `outer` or beneath it.
bool IsBeneath(absl::string_view inner, absl::string_view outer) {
  if (outer == "/") return !inner.empty() && inner[0] == '/';
  return inner == outer ||
         (inner.size() > outer.size() &&
          inner.substr(0, outer.size()) == outer && inner[outer.size()] == '/');
}

// `path` (beneath `from`) moved under `to`.
std::string Rebase(const std::string& path, const std::string& from,
                   const std::string& to) {
  const std::string rest =
      from == "/" ? path.substr(1)
                  : path.substr(std::min(path.size(), from.size() + 1));
  if (rest.empty()) return to;
  return to == "/" ? absl::StrCat("/", rest) : absl::StrCat(to, "/", rest);
}

}  // namespace

std::vector<Exclusion> WithMountAliases(
    const std::vector<Exclusion>& exclusions,
    const std::vector<MountEntry>& mounts) {
  std::vector<Exclusion> out;
  for (const Exclusion& e : exclusions) {
    char resolved[PATH_MAX];
    const std::string path =
        ::realpath(e.path.c_str(), resolved) != nullptr ? resolved : e.path;
    out.push_back({path, e.keep});
    // The mount the path is on: the deepest mount point above it, the
    // later of two at the same place (the one on top).
    const MountEntry* on = nullptr;
    for (const MountEntry& m : mounts) {
      if (IsBeneath(path, m.point) &&
          (on == nullptr || m.point.size() >= on->point.size())) {
        on = &m;
      }
    }
    if (on == nullptr) continue;
    // The path inside its file system.
    const std::string inside = Rebase(path, on->point, on->root);
    for (const MountEntry& m : mounts) {
      if (&m == on || m.device != on->device) continue;
      if (IsBeneath(inside, m.root)) {
        out.push_back({Rebase(inside, m.root, m.point), e.keep});
      } else if (IsBeneath(m.root, inside)) {
        out.push_back({m.point, e.keep});
      }
    }
  }
  return out;
}

absl::StatusOr<UniqueFd> CreateRuleset(int abi, uint64_t handled_fs,
                                       uint64_t scoped) {
  RulesetAttr attr{};
  attr.handled_access_fs = handled_fs;
  attr.scoped = scoped;
  // Without scopes, the ABI 1 size: any Landlock kernel takes it.
  const size_t size = scoped != 0 ? sizeof(attr) : sizeof(uint64_t);
  UniqueFd ruleset(CreateRulesetCall(&attr, size, 0));
  if (!ruleset) {
    return ErrnoError(
        errno, absl::StrCat("landlock_create_ruleset (ABI ", abi, ", fs 0x",
                            absl::Hex(handled_fs), ", scoped 0x",
                            absl::Hex(scoped), ")"));
  }
  // The kernel makes the ruleset fd O_CLOEXEC; we check rather than trust
  // it: the command must never inherit the fd.
  const int flags = ::fcntl(ruleset.get(), F_GETFD);
  if (flags < 0 || (flags & FD_CLOEXEC) == 0) {
    if (::fcntl(ruleset.get(), F_SETFD, FD_CLOEXEC) != 0) {
      return ErrnoError(errno, "landlock ruleset: FD_CLOEXEC");
    }
  }
  return ruleset;
}

}  // namespace sandfence::confine
