// Kernel-enforced confinement of a process sandfence starts: no_new_privs,
// Landlock and seccomp, applied by the process to itself just before exec
// (as Codex's Linux sandbox, sandlock and bubblewrap do). The kernel holds
// them for the rest of the process's life and its descendants': nothing in
// the sandbox can lift them, and a phase switch cannot change them either
// (a later phase that allows more than the first one did still gets only
// what the first one allowed here).
//
// Prepare in the parent, apply in the child. Between clone and exec only
// async-signal-safe work is allowed, so everything that allocates, walks
// the file system or may fail for reasons worth a message happens in
// PrepareConfinement; ApplyConfinement makes raw system calls only.
//
//   parent                                 child (after clone, before exec)
//   PrepareConfinement(plan)               [mount a fresh /proc, if any]
//     probe the Landlock ABI               ApplyConfinement(prepared)
//     walk / to the exclusions, create       prctl(PR_SET_NO_NEW_PRIVS)
//       the ruleset, add every rule          drop CAP_SYS_ADMIN, CAP_PERFMON
//     build the seccomp program              add the fresh mounts' rules
//                                            landlock_restrict_self; close
//                                            seccomp(SET_MODE_FILTER)
//                                          execve (allowed by both)
//
// Each child that applies it gets a Landlock domain of its own: two
// sandboxes started from one PreparedConfinement cannot ptrace or signal
// each other, and a process started later (`enter`) cannot join an existing
// sandbox's domain: it gets a new one.
//
// What Landlock alone does across the domain's boundary on this kernel
// (6.18, ABI 7), as root and as nobody alike (tests/confine/confine_test.cc
// checks every item, with the same call unconfined as its control):
//   - ptrace attach and seize, process_vm_readv/writev, pidfd_getfd,
//     get_robust_list: EPERM; /proc/<pid>/mem, io, fdinfo/N, map_files/,
//     and readlink or open of cwd, root (and paths through it), exe, fd/N,
//     ns/*: EACCES; syscall and personality open but refuse to read
//     (EPERM): the ptrace_access_check hook, whatever the capabilities;
//   - /proc/<pid>/environ, maps, smaps, auxv, pagemap: EACCES, EXCEPT to a
//     process holding CAP_PERFMON or CAP_SYS_ADMIN. mm_access() (kernel/
//     fork.c) grants PTRACE_MODE_READ to perfmon_capable() callers after
//     ptrace_may_access() said no ("mm,procfs: allow read-only remote mm
//     access under CAP_PERFMON", 2025), so no LSM can refuse them. Root's
//     "environ stays readable" is that. ApplyConfinement drops both
//     capabilities (drop_read_bypass_capabilities) to close it;
//   - signals: kill, tgkill, tkill, rt_sigqueueinfo, pidfd_send_signal get
//     EPERM; kill(0) and kill(-1) succeed but skip every process outside;
//     SIGIO/F_SETSIG signals to an F_SETOWN owner outside are dropped
//     (ABI 6 signal scope). Abstract Unix sockets: connect and sendto get
//     EPERM (ABI 6 socket scope);
//   - still allowed: cmdline, status, stat, limits, mountinfo of any
//     process (not ptrace-gated), the list of fd numbers in fd/ (not their
//     targets), and connect() to a pathname Unix socket under a no_access
//     path: Landlock has no right for it before kernels after 6.18 (file
//     permissions still apply).
#ifndef SANDFENCE_CONFINE_CONFINE_H_
#define SANDFENCE_CONFINE_CONFINE_H_

#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "confine/landlock.h"

namespace sandfence {

// File-system types no sandboxed process may write, wherever they are
// mounted (a second mount of cgroupfs or bpffs outside /sys would otherwise
// be a path around the /sys exclusion): cgroup, cgroup2, bpf, sysfs, proc,
// securityfs, debugfs, tracefs, configfs, efivarfs, pstore, binfmt_misc,
// selinuxfs, smackfs, fusectl.
std::vector<std::string> DefaultNoWriteFsTypes();

struct ConfinePlan {
  // Subtrees that stay readable but never writable. /sys whole: cgroupfs
  // and bpffs live under it. /proc whole: /proc/sys, /proc/sysrq-trigger
  // and other processes' /proc/<pid> files. Writes to the process's own
  // /proc/self files go too (oom_score_adj, task/<tid>/comm as
  // pthread_setname_np uses for another thread, /proc/self/mem, attr/*):
  // Landlock cannot grant them, since a rule on /proc/self binds the pid
  // directory of whoever prepared the rule, not the child's. Writing
  // through /proc/self/fd/N is unaffected (Landlock judges the file it
  // names: a pipe, a file in /tmp). Paths that do not exist are skipped.
  std::vector<std::string> no_write = {"/sys", "/proc"};
  // Mount points of these types join no_write (read from
  // /proc/self/mountinfo when preparing).
  std::vector<std::string> no_write_fs_types = DefaultNoWriteFsTypes();
  // Subtrees with no access at all (read, write, execute): sandfence's
  // state, records, runtime socket directory, pin root. The caller
  // supplies them. Any of these (or a hidden raw device) makes Landlock
  // handle the read rights too, granted everywhere else.
  std::vector<std::string> no_access;
  // Whether the directories on the way to a no_access path can be listed
  // (`ls /`, `ls /var/lib`). Landlock grants by hierarchy, so listing them
  // lets the names (not the contents) beneath the no_access paths be
  // listed too. false hides the names and makes `ls /` fail.
  bool list_ancestors_of_no_access = true;
  // Paths the child mounts anew between clone and ApplyConfinement: the
  // fresh /proc of a PID namespace (SpawnOptions::pid_namespace). A rule
  // prepared on the host's /proc does not reach a file system mounted over
  // it later (Landlock's walk skips a covered mount point), so every read
  // of the fresh /proc would be refused; ApplyConfinement opens each of
  // these again and adds the rule the plan gives that path.
  std::vector<std::string> fresh_mounts;
  // Mount points that the process's own mount namespace detaches before it
  // applies the confinement (`sandfence run`'s init detaches the special
  // file systems mounted outside /proc and /sys, e.g. a second procfs under
  // /tmp): they are not there to exclude, and excluding them would take
  // from the directories above them every right to create (Landlock grants
  // by hierarchy). The caller detaches them; a path not detached stays
  // reachable, so only name what the child really detaches.
  std::vector<std::string> detached_mounts;
  // Root opens block devices with no capability at all: the raw disk
  // beneath every file Landlock guards (sandfence's state included), read
  // or written. Every block device under /dev, and the character devices
  // that reach around file rules or out of the sandbox (memory, raw SCSI
  // and NVMe, userfaultfd, virtual input, consoles, watchdog, kernel log:
  // confine::RawDeviceNodes), join no_access.
  bool hide_raw_devices = true;
  // No device node is ever created (mknod of a character or block device):
  // a root process with CAP_MKNOD would make its own /dev/vda anywhere.
  // FIFOs and sockets stay allowed.
  bool no_device_nodes = true;
  // io_uring's operations bypass every check made at system-call level; a
  // policy may allow it.
  bool deny_io_uring = true;
  // Landlock already confines ptrace to the sandbox's own processes; this
  // refuses it inside the sandbox too.
  bool deny_ptrace = false;
  // Drops CAP_SYS_ADMIN and CAP_PERFMON (every set, bounding and ambient
  // included): either lets a process read other processes' environ, maps,
  // auxv and pagemap past Landlock (see above).
  bool drop_read_bypass_capabilities = true;
};

// What PrepareConfinement built: a Landlock ruleset (its fd, O_CLOEXEC) and
// a seccomp program, with what the kernel's ABI could and could not do.
// Movable, not copyable. One object can serve any number of children:
// each child applies its own copy.
class PreparedConfinement {
 public:
  PreparedConfinement(PreparedConfinement&&) = default;
  PreparedConfinement& operator=(PreparedConfinement&&) = default;

  const ConfinePlan& plan() const { return plan_; }
  int landlock_abi() const { return landlock_abi_; }
  uint64_t handled_fs() const { return handled_fs_; }
  uint64_t scoped() const { return scoped_; }
  // What this kernel's Landlock lacks of what the plan would use, one
  // phrase each ("signal and abstract Unix socket scoping (ABI 6)").
  const std::vector<std::string>& lacking() const { return lacking_; }
  const confine::RulePlan& rules() const { return rules_; }
  // The device nodes hidden by hide_raw_devices (also in rules().applied).
  const std::vector<std::string>& raw_devices() const { return raw_devices_; }
  // The rights ApplyConfinement grants each fresh mount (0: none needed).
  uint64_t fresh_mount_rights(const std::string& path) const {
    for (const FreshMount& m : fresh_mounts_) {
      if (m.path == path) return m.rights;
    }
    return 0;
  }
  const std::vector<sock_filter>& seccomp_program() const { return filter_; }
  // The ruleset fd in this process (-1 once applied here).
  int ruleset_fd() const { return ruleset_.get(); }

 private:
  friend absl::StatusOr<PreparedConfinement> PrepareConfinement(
      const ConfinePlan& plan);
  friend int ApplyConfinement(const PreparedConfinement& prepared,
                              int* failed_step) noexcept;
  PreparedConfinement() = default;

  ConfinePlan plan_;
  int landlock_abi_ = 0;
  uint64_t handled_fs_ = 0;
  uint64_t scoped_ = 0;
  std::vector<std::string> lacking_;
  confine::RulePlan rules_;
  std::vector<std::string> raw_devices_;
  struct FreshMount {
    std::string path;
    uint64_t rights;
  };
  std::vector<FreshMount> fresh_mounts_;
  std::vector<sock_filter> filter_;
  // Mutable: ApplyConfinement closes it in the applying process, and the
  // object must then not close that number again.
  mutable UniqueFd ruleset_;
};

// Runs in the parent. Rejected (FailedPrecondition) when this host cannot
// confine (no Landlock: the caller refuses or falls back, never runs
// without); Malformed for a relative path; errno-carrying errors for the
// rest.
absl::StatusOr<PreparedConfinement> PrepareConfinement(const ConfinePlan& plan);

// The steps of ApplyConfinement, for reporting which one failed.
enum ConfineStep : int {
  kConfineStepNoNewPrivs = 1,
  kConfineStepCapabilities,
  kConfineStepLandlock,
  kConfineStepSeccomp,
  kConfineStepFreshMounts,
};
// A static string: safe between clone and exec.
const char* ConfineStepName(int step) noexcept;

// Runs in the child, between clone and exec: raw system calls only, no
// allocation, no locks. Returns 0, or -errno with *failed_step (when not
// null) set to the ConfineStep that failed. Must run in a single-threaded
// process (Landlock and seccomp bind the calling thread; the child of
// clone is), never in a CLONE_VM child sharing the parent's memory (it
// releases the ruleset fd from `prepared`). Closes the ruleset fd: a second
// call in the same process fails with -EBADF at kConfineStepLandlock.
int ApplyConfinement(const PreparedConfinement& prepared,
                     int* failed_step = nullptr) noexcept;

// One line of "what holds": the guarantee, and the layer that holds it.
enum class ConfineGuaranteeId {
  kNoPtraceAcross,      // ptrace, process_vm_*, pidfd_getfd, /proc/<pid>/mem
  kNoProcReadAcross,    // /proc/<pid>/{environ,maps,fd,cwd,...}
  kNoSignalOut,         // kill & co., SIGIO through F_SETOWN
  kNoAbstractUnixOut,   // connect/sendto an abstract socket outside
  kNoPathnameUnixOut,   // connect to a socket file under a no_access path
  kNoLimitsOnOthers,    // prlimit64 on another process
  kNoPriorityOfOthers,  // setpriority, sched_setattr, ioprio_set outside
  kNoUserNamespace,
  kNoOtherNamespace,  // mount, pid, net, uts, ipc, cgroup, time; setns
  kNoMount,
  kNoBpf,
  kNoPerfEvents,
  kNoKernelCode,     // modules, kexec
  kNoHostWideCalls,  // clock, reboot, swap, quotas, syslog, ...
  kNoKeyrings,
  kNoTerminalInjection,  // TIOCSTI, TIOCLINUX
  kNoWrites,             // no_write paths and fs types
  kNoAccess,             // no_access paths
  kNoRawDevices,         // block devices, /dev/mem, sg, uinput, ...
  kNoDeviceNodes,        // mknod of a character or block device
  kNo32BitEntry,         // int $0x80 and x32
  kNoIoUring,
  kNoPtraceInside,
  kNoPrivilegeGainAtExec,  // setuid and file capabilities (no_new_privs)
};

struct ConfineGuarantee {
  ConfineGuaranteeId id;
  std::string what;  // "no signal to a process outside"
  bool holds = false;
  // "landlock ABI 7", "seccomp", "no_new_privs"; when it does not hold,
  // "—: " and why ("—: landlock ABI 5: no signal scoping").
  std::string layer;
};

// What holds for processes that applied `prepared`.
std::vector<ConfineGuarantee> DescribeConfinement(
    const PreparedConfinement& prepared);
// What would hold for `plan` on a kernel with this Landlock ABI (0: none),
// before anything is prepared (for `check`).
std::vector<ConfineGuarantee> DescribeConfinement(const ConfinePlan& plan,
                                                  int landlock_abi);

// Whether this host can confine, and why not.
struct ConfineSupport {
  int landlock_abi = 0;  // 0: none
  uint64_t landlock_errata = 0;
  int landlock_errno = 0;       // of the ABI probe, when none
  std::string landlock_reason;  // why none: ENOSYS = not built, EOPNOTSUPP =
                                // not in the LSM list
  bool seccomp_filter = false;  // SECCOMP_SET_MODE_FILTER with RET_ERRNO
  std::string seccomp_reason;
  // A child applied a plan and saw a denial from each layer (Landlock:
  // its parent's /proc/<pid>/mem; seccomp: bpf()): probed by applying,
  // not by reading /sys/kernel/security/lsm.
  bool applied = false;
  std::string apply_reason;

  bool usable() const { return landlock_abi >= 1 && seccomp_filter && applied; }
  // OK, or Rejected (FailedPrecondition) with every reason.
  absl::Status Usable() const;
};

// Probes the host (forks one short-lived child). Errors only when the probe
// itself cannot run (fork, pipe); an unusable host is a ConfineSupport that
// says why.
absl::StatusOr<ConfineSupport> ProbeConfinement();

}  // namespace sandfence

#endif  // SANDFENCE_CONFINE_CONFINE_H_
