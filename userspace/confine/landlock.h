// Landlock for a process sandfence starts: the ABI this kernel has, and a
// ruleset that allows every file-system right except in excluded subtrees.
//
// Landlock only allows. "Everything but X" is written as a rule for each
// sibling of each of X's ancestors, found by walking from / down to X, plus
// a rule on each ancestor itself for the rights that X keeps (so that /
// stays readable when /sys is only write-protected). The walk is a snapshot
// taken when the ruleset is built: an entry created later beside an
// ancestor of X gets only what that ancestor's own rule gives (nothing can
// be created or removed directly in the parent of an excluded path, e.g. in
// / while /sys is excluded).
//
// Rules bind inodes, not strings: a rule on a second name of an excluded
// place (another mount of its file system, a bind mount) grants it under
// every name. So special file systems are excluded by type wherever they
// are mounted (cgroupfs, bpffs, sysfs, procfs, ...), every exclusion is
// expanded with the other names the mount table gives it
// (WithMountAliases), and the walk refuses to grant an entry that is, by
// inode, a directory on the way to an exclusion. A hard link to a file
// under an excluded path, made before the sandbox starts, stays reachable
// through its other name: Landlock cannot tell.
//
// Landlock's walk up from a file skips a mount point that another mount
// covers: a rule on a directory that something is later mounted over
// stops applying beneath that mount (see ConfinePlan::fresh_mounts).
#ifndef SANDFENCE_CONFINE_LANDLOCK_H_
#define SANDFENCE_CONFINE_LANDLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandfence::confine {

// Access rights and scopes, by bit (UAPI <linux/landlock.h>; Debian 12's
// headers stop at ABI 2, so the later bits are spelled here).
inline constexpr uint64_t kFsExecute = 1ULL << 0;
inline constexpr uint64_t kFsWriteFile = 1ULL << 1;
inline constexpr uint64_t kFsReadFile = 1ULL << 2;
inline constexpr uint64_t kFsReadDir = 1ULL << 3;
inline constexpr uint64_t kFsRemoveDir = 1ULL << 4;
inline constexpr uint64_t kFsRemoveFile = 1ULL << 5;
inline constexpr uint64_t kFsMakeChar = 1ULL << 6;
inline constexpr uint64_t kFsMakeDir = 1ULL << 7;
inline constexpr uint64_t kFsMakeReg = 1ULL << 8;
inline constexpr uint64_t kFsMakeSock = 1ULL << 9;
inline constexpr uint64_t kFsMakeFifo = 1ULL << 10;
inline constexpr uint64_t kFsMakeBlock = 1ULL << 11;
inline constexpr uint64_t kFsMakeSym = 1ULL << 12;
inline constexpr uint64_t kFsRefer = 1ULL << 13;                 // ABI 2
inline constexpr uint64_t kFsTruncate = 1ULL << 14;              // ABI 3
inline constexpr uint64_t kFsIoctlDev = 1ULL << 15;              // ABI 5
inline constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
inline constexpr uint64_t kScopeSignal = 1ULL << 1;              // ABI 6

// What reading needs; everything else Landlock knows is write-like.
inline constexpr uint64_t kFsReadRights = kFsExecute | kFsReadFile | kFsReadDir;
// The rights a rule on a non-directory may carry (the kernel refuses others).
inline constexpr uint64_t kFsFileRights =
    kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;

// The file-system rights this ABI knows (0 for ABI < 1).
uint64_t FsRightsOfAbi(int abi);
// The write-like rights of this ABI: all it knows but the read rights.
uint64_t FsWriteRightsOfAbi(int abi);
// The scopes of this ABI (signal and abstract Unix socket from ABI 6).
uint64_t ScopesOfAbi(int abi);

// The Landlock ABI of the running kernel, or why there is none.
struct LandlockAbi {
  int version = 0;      // 0: none
  int error = 0;        // errno of the probe when version is 0
  uint64_t errata = 0;  // fixed issues (LANDLOCK_CREATE_RULESET_ERRATA)
  std::string reason;   // why none: "not built into this kernel (ENOSYS)"
};
LandlockAbi ProbeLandlockAbi();

// A subtree and the rights it keeps: no_write keeps the read rights,
// no_access keeps none.
struct Exclusion {
  std::string path;  // absolute
  uint64_t keep = 0;
};

// One rule of the ruleset: beneath `path`, allow `rights`.
struct PlannedRule {
  std::string path;
  uint64_t rights = 0;
  bool directory = false;
};

// Where the walk went, for DescribeConfinement and for tests.
struct RulePlan {
  std::vector<PlannedRule> rules;
  // Exclusions as applied: canonical (symlinks resolved), existing, not
  // implied by another one.
  std::vector<Exclusion> applied;
  std::vector<std::string> skipped;  // excluded paths that do not exist
  // procfs directories that held an exclusion below them: never
  // enumerated (pid directories), so the whole procfs mount got the
  // strictest exclusion beneath it.
  std::vector<std::string> widened;
  // Entries not granted because they are the same directory as one on the
  // way to an exclusion, or an exclusion itself, under another name (a
  // second mount or bind mount the mount table did not explain): a rule
  // there would have granted the excluded subtree through its inode.
  std::vector<std::string> aliases_refused;
};

// Plans the rules that allow `handled` everywhere except in `exclusions`
// (each keeping its `keep & handled`) and except `withheld`, granted
// nowhere; adds each rule to `ruleset_fd` as it goes (-1: plan only),
// through the O_PATH fd the walk opened. Relative paths are Malformed;
// excluded paths that do not exist are skipped. list_ancestors: the
// directories on the way to an exclusion may be listed (READ_DIR, when
// handled), which lets the names beneath the exclusion be listed too:
// Landlock grants by hierarchy.
absl::StatusOr<RulePlan> PlanRules(const std::vector<Exclusion>& exclusions,
                                   uint64_t handled, bool list_ancestors,
                                   int ruleset_fd = -1, uint64_t withheld = 0);

// The rights a plan gives everything beneath `path` (its exclusions as
// applied, and what is handled and not withheld): what a file system
// mounted at `path` later must be granted to be treated alike.
uint64_t RightsBeneath(const std::vector<Exclusion>& applied,
                       const std::string& path, uint64_t handled,
                       uint64_t withheld);

// The device nodes under `dev` (its own file system only, symlinks not
// followed) that reach around every file rule or out of the sandbox: every
// block device (the raw disk beneath the files Landlock guards), and the
// character devices named in kRawCharDevices.
absl::StatusOr<std::vector<std::string>> RawDeviceNodes(
    const std::string& dev = "/dev");

// One line of a mountinfo table.
struct MountEntry {
  std::string device;  // "major:minor" of the file system
  std::string root;    // the directory of that file system mounted here
  std::string point;   // where, in our mount namespace
  std::string type;
};
absl::StatusOr<std::vector<MountEntry>> ReadMountInfo(
    const std::string& mountinfo_path = "/proc/self/mountinfo");

// Mount points of these file-system types, in table order.
std::vector<std::string> MountPointsOfTypes(
    const std::vector<MountEntry>& mounts,
    const std::vector<std::string>& fs_types);

// The exclusions and every other name the mount table gives them: the same
// file system mounted (or bind-mounted) elsewhere exposes an excluded
// subtree there, and a rule on that other name would grant it (rules bind
// inodes). A mount of a directory above an excluded path adds the path
// beneath it; a mount of a directory inside one adds the mount point.
// Paths are resolved first (symlinks); the results may not exist.
std::vector<Exclusion> WithMountAliases(
    const std::vector<Exclusion>& exclusions,
    const std::vector<MountEntry>& mounts);

// An empty ruleset fd (O_CLOEXEC) handling `handled_fs` and `scoped`.
absl::StatusOr<UniqueFd> CreateRuleset(int abi, uint64_t handled_fs,
                                       uint64_t scoped);

}  // namespace sandfence::confine

#endif  // SANDFENCE_CONFINE_LANDLOCK_H_
